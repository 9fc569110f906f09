"""Stand-ins the storage tests share: a generation record with every field set, and wake-up
hubs that note what a wake-up source tells them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from app.storage.records import GenerationRecord

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def generation_record(**changes: object) -> GenerationRecord:
    """A terminal generation (epoch 2, seqs 4-9 retained) with `changes` applied."""
    fields: dict[str, object] = {
        "pk": 3, "token": "tok", "stream_pk": 7, "stream_id": "s", "tenant": "t", "epoch": 2,
        "reason": "reset", "producer": None, "head_seq": 4, "tail_seq": 9,
        "retained_events": 6, "retained_bytes": 60, "terminal": True, "terminal_seq": 9,
        "max_events": 6, "ttl_seconds": 60, "supersedes": "old", "created_at": NOW,
        "last_append_at": NOW, "expires_at": NOW, "terminal_at": NOW, "superseded_at": None,
        "expired_at": None,
    }  # fmt: skip
    return GenerationRecord(**(fields | changes))  # type: ignore[arg-type]


class Hub:
    """A hub that watches nothing and notes when its source is up."""

    def __init__(self) -> None:
        self.up = asyncio.Event()

    def source_up(self, _name: str, _up: bool) -> None:
        self.up.set()

    def watched(self) -> list[int]:
        return []

    def wake(self, stream_pks: Any, sent_at: float | None = None, *, appended: Any = None) -> None:
        pass


class RecordingHub(Hub):
    """A hub that keeps every wake-up's streams."""

    def __init__(self) -> None:
        super().__init__()
        self.woken: list[Any] = []

    def wake(self, stream_pks: Any, sent_at: float | None = None, *, appended: Any = None) -> None:
        self.woken.append(stream_pks)
