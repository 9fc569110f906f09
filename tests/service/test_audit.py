"""The decision audit log's buffer: no I/O on the resume path, bounded, retried on failure."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from app.domain.decision import decide
from app.service.audit import DecisionAudit
from app.service.eventlog import ResumeAnswer
from app.storage.decisions import DecisionEntry
from app.storage.errors import StorageUnavailable

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class FakeDecisionStore:
    """Records what would be written; can be told to fail like a lost database."""

    def __init__(self) -> None:
        self.written: list[DecisionEntry] = []
        self.batches = 0
        self.down = False

    async def record(self, entries: Sequence[DecisionEntry]) -> None:
        if self.down:
            raise StorageUnavailable("database is down")
        self.batches += 1
        self.written.extend(entries)


def malformed(claim: str) -> ResumeAnswer:
    return ResumeAnswer(decide(claim, asked_stream="s1", generation=None), "s1", None, None)


def audit_on(store: FakeDecisionStore, **options: object) -> DecisionAudit:
    return DecisionAudit(store, clock=lambda: NOW, **options)  # type: ignore[arg-type]


async def test_a_decision_is_only_buffered_until_flushed() -> None:
    store = FakeDecisionStore()
    audit = audit_on(store)
    for n in range(3):
        audit.decided("t1", f"bad id {n}", malformed(f"bad id {n}"))
    assert store.written == []
    await audit.flush()
    assert store.batches == 1
    assert [e.last_event_id for e in store.written] == ["bad id 0", "bad id 1", "bad id 2"]
    entry = store.written[0]
    assert (entry.tenant, entry.stream_id, entry.verdict, entry.reason) == (
        "t1",
        "s1",
        "invalid",
        "malformed_id",
    )
    assert (entry.decided_at, entry.generation, entry.events) == (NOW, None, 0)


async def test_a_full_buffer_drops_the_oldest_and_counts_them() -> None:
    store = FakeDecisionStore()
    dropped: list[int] = []
    audit = audit_on(store, buffer_limit=2, on_dropped=dropped.append)
    for n in range(5):
        audit.decided("t1", str(n), malformed(str(n)))
    await audit.flush()
    assert [e.last_event_id for e in store.written] == ["3", "4"]
    assert sum(dropped) == 3


async def test_a_failed_flush_keeps_the_entries_for_the_next_one() -> None:
    store = FakeDecisionStore()
    audit = audit_on(store)
    audit.decided("t1", "a", malformed("a"))
    store.down = True
    with pytest.raises(StorageUnavailable):
        await audit.flush()
    audit.decided("t1", "b", malformed("b"))
    store.down = False
    await audit.flush()
    assert [e.last_event_id for e in store.written] == ["a", "b"]


async def test_disabled_records_nothing_but_still_warns_on_invalid(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FakeDecisionStore()
    audit = audit_on(store, enabled=False)
    audit.decided("t1", "x" * 500, malformed("x" * 500))
    await audit.flush()
    assert store.written == []
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "malformed_id" in warning.getMessage()
    assert "x" * 100 not in warning.getMessage()  # a client's claim is logged cut short


async def test_stop_writes_what_is_left() -> None:
    store = FakeDecisionStore()
    audit = audit_on(store)
    audit.start()
    audit.decided("t1", "a", malformed("a"))
    await audit.stop()
    assert [e.last_event_id for e in store.written] == ["a"]
