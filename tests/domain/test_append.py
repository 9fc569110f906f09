"""The append rules: positions, idempotent retries, refusals."""

from __future__ import annotations

import pytest

from app.domain.append import (
    AppendConflict,
    AppendPlan,
    EventBody,
    GenerationState,
    NotAppended,
    overlap,
    plan_append,
)

A, B, C = EventBody("a"), EventBody("b", "progress"), EventBody("c")
STORED = {3: A, 4: B, 5: C}
OPEN = GenerationState(head_seq=3, tail_seq=5, current=True, terminal=False, terminal_seq=None)
DONE = GenerationState(head_seq=3, tail_seq=5, current=True, terminal=True, terminal_seq=5)
FENCED = GenerationState(head_seq=3, tail_seq=5, current=False, terminal=False, terminal_seq=None)
ABANDONED = GenerationState(
    head_seq=3, tail_seq=5, current=True, terminal=False, terminal_seq=None, abandoned=True
)
EXPIRED = GenerationState(
    head_seq=6, tail_seq=5, current=True, terminal=False, terminal_seq=None, expired=True
)


def plan(
    state: GenerationState,
    batch: list[EventBody],
    first_seq: int | None,
    terminal: bool = False,
) -> AppendPlan | NotAppended:
    stored = {seq: STORED[seq] for seq in overlap(state, first_seq, len(batch)) if seq in STORED}
    return plan_append(state, batch, first_seq=first_seq, terminal=terminal, stored=stored)


@pytest.mark.parametrize(
    ("state", "batch", "first_seq", "terminal", "expected"),
    [
        (OPEN, [A, B], None, False, AppendPlan(6, 2, duplicate=False, terminal=False)),
        (OPEN, [A], 6, True, AppendPlan(6, 1, duplicate=False, terminal=True)),
        (OPEN, [], None, True, AppendPlan(6, 0, duplicate=False, terminal=True)),
        (OPEN, [A, B], 3, False, AppendPlan(3, 2, duplicate=True, terminal=False)),
        (OPEN, [C], 5, False, AppendPlan(5, 1, duplicate=True, terminal=False)),
        (DONE, [B, C], 4, True, AppendPlan(4, 2, duplicate=True, terminal=True)),
        (DONE, [A], 3, False, AppendPlan(3, 1, duplicate=True, terminal=False)),
        (DONE, [], 6, True, AppendPlan(6, 0, duplicate=True, terminal=True)),
        (FENCED, [A, B], 3, False, AppendPlan(3, 2, duplicate=True, terminal=False)),
        (ABANDONED, [B, C], 4, False, AppendPlan(4, 2, duplicate=True, terminal=False)),
    ],
    ids=[
        "assigned",
        "given, terminal",
        "empty terminal",
        "retry",
        "retry of the tail",
        "retry of a terminal batch",
        "retry before terminal",
        "repeated finish",
        "retry after fencing",
        "retry after abandonment",
    ],
)
def test_accepted(
    state: GenerationState,
    batch: list[EventBody],
    first_seq: int | None,
    terminal: bool,
    expected: AppendPlan,
) -> None:
    assert plan(state, batch, first_seq, terminal) == expected


@pytest.mark.parametrize(
    ("state", "batch", "first_seq", "terminal", "conflict"),
    [
        (FENCED, [A], None, False, AppendConflict.SUPERSEDED),
        (FENCED, [A], 6, False, AppendConflict.SUPERSEDED),
        (FENCED, [], None, True, AppendConflict.SUPERSEDED),
        (DONE, [A], None, False, AppendConflict.TERMINAL),
        (DONE, [A], 6, False, AppendConflict.TERMINAL),
        (DONE, [], None, True, AppendConflict.TERMINAL),
        (ABANDONED, [A], None, False, AppendConflict.ABANDONED),
        (ABANDONED, [A], 6, False, AppendConflict.ABANDONED),
        (ABANDONED, [], None, True, AppendConflict.ABANDONED),
        (EXPIRED, [A], None, False, AppendConflict.EXPIRED),
        (EXPIRED, [A], 6, False, AppendConflict.EXPIRED),
        (EXPIRED, [], None, True, AppendConflict.EXPIRED),
        (OPEN, [A], 7, False, AppendConflict.SEQ_GAP),
        (OPEN, [A, B], 4, False, AppendConflict.SEQ_CONFLICT),
        (OPEN, [EventBody("a", "other")], 3, False, AppendConflict.SEQ_CONFLICT),
        (OPEN, [B, C, A], 4, False, AppendConflict.SEQ_CONFLICT),
        (OPEN, [A], 2, False, AppendConflict.SEQ_CONFLICT),
        (OPEN, [], 5, True, AppendConflict.SEQ_CONFLICT),
        (OPEN, [A, B], 3, True, AppendConflict.SEQ_CONFLICT),
    ],
    ids=[
        "fenced",
        "fenced, next seq",
        "fenced, empty terminal",
        "finished",
        "finished, next seq",
        "finished, empty terminal without first_seq",
        "abandoned",
        "abandoned, next seq",
        "abandoned, empty terminal",
        "expired",
        "expired, next seq",
        "expired, empty terminal",
        "gap",
        "other content",
        "other event type",
        "overlaps the tail",
        "before the head: cannot verify",
        "empty batch inside the log",
        "retry claims terminal, stored was not",
    ],
)
def test_refused(
    state: GenerationState,
    batch: list[EventBody],
    first_seq: int | None,
    terminal: bool,
    conflict: AppendConflict,
) -> None:
    outcome = plan(state, batch, first_seq, terminal)
    assert isinstance(outcome, NotAppended)
    assert outcome.conflict is conflict
    assert outcome.detail


def test_overlap_is_the_retained_stored_part() -> None:
    assert overlap(OPEN, None, 3) == range(0)
    assert overlap(OPEN, 6, 3) == range(0)
    assert overlap(OPEN, 4, 5) == range(4, 6)
    assert overlap(OPEN, 1, 3) == range(3, 4)


def test_last_seq_of_an_empty_batch_is_the_tail() -> None:
    assert AppendPlan(6, 0, duplicate=False, terminal=True).last_seq == 5
