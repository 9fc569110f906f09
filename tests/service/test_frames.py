"""What a live reader is sent: frames are values (equal when their fields are, never
edited), and a page's frames are one tuple that every reader given the page can hold."""

from __future__ import annotations

import dataclasses

import pytest

from app.domain.decision import Reason
from app.service.frames import (
    Closing,
    EndFrame,
    EventFrame,
    Heartbeat,
    PageFrames,
    ResetFrame,
)


def test_frames_are_values() -> None:
    assert EventFrame("tok", 1, None, "a") == EventFrame("tok", 1, None, "a")
    assert ResetFrame(Reason.SUPERSEDED, None) != ResetFrame(Reason.SUPERSEDED, "new")
    assert Heartbeat() == Heartbeat()
    frames = {EndFrame("tok", 3), EndFrame("tok", 3), Closing(1000)}
    assert len(frames) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        EndFrame("tok", 3).terminal_seq = 4  # type: ignore[misc]


def test_a_pages_frames_are_a_tuple_of_event_frames() -> None:
    events = (EventFrame("tok", 1, None, "a"), EventFrame("tok", 2, "kind", "b"))
    page = PageFrames(events)
    assert isinstance(page, tuple)
    assert page == events
    assert page[1].event == "kind"
    assert not hasattr(page, "__dict__")  # nothing else is kept on it
