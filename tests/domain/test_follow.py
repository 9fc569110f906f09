"""Every rule of a live reader's turn (`judge()`), in order, and where a reset leads next."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.domain.append import GenerationState
from app.domain.decision import Reason
from app.domain.follow import Current, Move, Seen, Turn, judge

# The followed generation (epoch 3): events 1..10, open.
OPEN = GenerationState(head_seq=1, tail_seq=10, current=True, terminal=False)
FINISHED = replace(OPEN, terminal=True, terminal_seq=10)
EXPIRED = replace(OPEN, expired=True)
EVICTED = replace(OPEN, head_seq=6)  # events 1..5 were evicted
SUPERSEDED = replace(OPEN, current=False)
ABANDONED = replace(OPEN, abandoned=True)
NEWER = Current(epoch=5, whole=True)  # the stream's current generation, newer and whole
NEWER_CUT = Current(epoch=5, whole=False)  # newer, but no longer whole from seq 1
ITSELF = Current(epoch=3, whole=True)  # the followed generation is still the current one
OLDER = Current(epoch=2, whole=True)  # older than anything the reader was told of
R, W, E, S, A = Move.READ_ON, Move.WAIT, Move.END, Move.SWITCH, Move.AWAIT_NEXT
GONE, EVIC, HOLE = Reason.EXPIRED, Reason.EVICTED, Reason.EVICTION_HOLE
SUP, ABAN = Reason.SUPERSEDED, Reason.ABANDONED
ENDED_SUPERSEDED = replace(FINISHED, current=False)
BOTH = replace(ABANDONED, current=False)  # abandoned and superseded
EMPTY = replace(OPEN, tail_seq=0)

# (case, gen, after, seen, epoch (the reader's), current, expected turn)
TABLE = [
    # rule 1: gone or expired
    ("gone: the next generation", None, 4, None, 3, NEWER, Turn(False, S, 5, GONE)),
    ("gone, nothing newer", None, 4, None, 3, None, Turn(False, A, 3, GONE)),
    ("expired beats a page", EXPIRED, 4, Seen(10), 3, ITSELF, Turn(False, A, 3, GONE)),
    # rule 2: the next event was evicted
    ("evicted", EVICTED, 4, Seen(10), 3, NEWER, Turn(False, S, 5, EVIC)),
    ("evicted, at the head", EVICTED, 5, None, 3, None, Turn(False, W, 3)),
    # rule 3: deliver
    ("a hole", OPEN, 4, Seen(10, False), 3, None, Turn(False, A, 3, HOLE)),
    ("a page cut short", OPEN, 4, Seen(7), 3, ITSELF, Turn(True, R, 3)),
    ("a page cut short of a superseded one", SUPERSEDED, 4, Seen(7), 3, NEWER, Turn(True, R, 3)),
    ("a page to the tail", OPEN, 4, Seen(10), 3, ITSELF, Turn(True, W, 3)),
    # rule 4: terminal, all delivered
    ("the last page of a finished one", FINISHED, 4, Seen(10), 3, ITSELF, Turn(True, E, 3)),
    ("all of a finished one already", FINISHED, 10, None, 3, ITSELF, Turn(False, E, 3)),
    ("end beats superseded", ENDED_SUPERSEDED, 10, None, 3, NEWER, Turn(False, E, 3)),
    # rule 5: superseded
    ("superseded", SUPERSEDED, 10, None, 3, NEWER, Turn(False, S, 5, SUP)),
    ("last page, then superseded", SUPERSEDED, 4, Seen(10), 3, NEWER, Turn(True, S, 5, SUP)),
    ("superseded, newer one cut", SUPERSEDED, 10, None, 3, NEWER_CUT, Turn(False, A, 5, SUP)),
    ("superseded, successor gone", SUPERSEDED, 10, None, 3, None, Turn(False, A, 3, SUP)),
    ("superseded beats abandoned", BOTH, 10, None, 3, NEWER, Turn(False, S, 5, SUP)),
    # rule 6: abandoned
    ("abandoned", ABANDONED, 10, None, 3, ITSELF, Turn(False, A, 3, ABAN)),
    ("last page, then abandoned", ABANDONED, 4, Seen(10), 3, ITSELF, Turn(True, A, 3, ABAN)),
    # rule 7: wait
    ("caught up", OPEN, 10, None, 3, ITSELF, Turn(False, W, 3)),
    ("caught up, empty", EMPTY, 0, None, 3, ITSELF, Turn(False, W, 3)),
    # where a reset leads: a generation newer than anything the reader was told of
    ("told of a newer epoch already", None, 4, None, 5, NEWER, Turn(False, A, 5, GONE)),
    ("told of a newer epoch still", None, 4, None, 7, NEWER, Turn(False, A, 7, GONE)),
    ("the current one older than told", None, 4, None, 3, OLDER, Turn(False, A, 3, GONE)),
    ("reader epoch below followed", None, 4, None, 1, ITSELF, Turn(False, A, 3, GONE)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("gen", "after", "seen", "epoch", "current", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in TABLE],
)
def test_each_rule_of_a_turn(
    gen: GenerationState | None,
    after: int,
    seen: Seen | None,
    epoch: int,
    current: Current | None,
    expected: Turn,
) -> None:
    turn = judge(gen, after=after, seen=seen, followed_epoch=3, epoch=epoch, current=current)
    assert turn == expected


def test_every_move_and_every_reset_reason_is_in_the_table() -> None:
    turns = [row[-1] for row in TABLE]
    assert {turn.move for turn in turns} == set(Move)
    reasons = {turn.reason for turn in turns if turn.reason is not None}
    assert reasons == {
        Reason.EXPIRED,
        Reason.EVICTED,
        Reason.EVICTION_HOLE,
        Reason.SUPERSEDED,
        Reason.ABANDONED,
    }
    assert all((turn.reason is None) == (turn.move in (R, W, E)) for turn in turns)
