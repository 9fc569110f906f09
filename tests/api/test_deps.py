"""What the routers depend on (`app/api/deps.py`): page sizes and the channels per key."""

from __future__ import annotations

import pytest

from app.api.deps import ChannelSlots, page_limit
from app.errors import InvalidRequest
from app.settings import Settings

SETTINGS = Settings(database_url="sqlite+aiosqlite://", default_page_limit=50, max_page_limit=80)


def test_a_page_size_is_as_asked_and_defaults_to_the_setting() -> None:
    assert page_limit(None, SETTINGS) == 50
    assert page_limit(1, SETTINGS) == 1
    assert page_limit(80, SETTINGS) == 80


def test_a_page_size_over_the_maximum_is_refused() -> None:
    with pytest.raises(InvalidRequest, match=r"maximum \(80\)"):
        page_limit(81, SETTINGS)


def test_channels_are_counted_per_key_and_given_back() -> None:
    slots = ChannelSlots(per_key=2)
    assert slots.take(b"a")
    assert slots.take(b"a")
    assert not slots.take(b"a")  # its limit: nothing more held
    assert slots.take(b"b")  # another key has its own
    slots.give(b"a")
    assert slots.take(b"a")
    for key in (b"a", b"a", b"b"):
        slots.give(key)
    assert slots._open == {}  # a key whose last channel closed holds no entry
