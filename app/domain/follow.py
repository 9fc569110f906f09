"""A live reader's next move after one read of the generation it follows.

`judge()` is one total function of what the read saw; the live reads
(`app/service/live.py`) do what it says (send the page, a `reset`, an `end`; read on,
switch generation or wait). Each read is judged in this order:
1. the generation is gone or expired               → reset `expired`, then the next one
2. the next event to deliver was evicted           → reset `evicted`, then the next one
3. events after the position are retained          → deliver them (a hole: `eviction_hole`);
   the page was cut short of the tail              → read on at once
4. the generation is terminal and all is delivered → `end`, and the connection closes
5. the generation was superseded                   → reset `superseded`, then the next one
6. the generation was abandoned (its writer's lease
   ran out, as the lease sweep recorded)            → reset `abandoned`, then the next one
7. otherwise                                       → wait for a wake-up (or a heartbeat)
"The next one" (`reset()`) is the stream's current generation from seq 1 when it is newer
and still whole, otherwise the next generation opened after it, as soon as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, Protocol

from app.domain.decision import Reason


class Followed(Protocol):
    """What the rules read of the followed generation (a stored one, or the domain's
    `GenerationState`, answers it as it is: no copy per read of a crowd of readers)."""

    @property
    def head_seq(self) -> int: ...
    @property
    def tail_seq(self) -> int: ...
    @property
    def current(self) -> bool: ...
    @property
    def terminal(self) -> bool: ...
    @property
    def expired(self) -> bool: ...
    @property
    def abandoned(self) -> bool: ...


class Move(StrEnum):
    """What the reader does after the frames of this turn are sent."""

    READ_ON = "read_on"
    """The page was cut short of the tail: read again at once."""
    END = "end"
    """Send `end` naming the generation's terminal seq; the connection closes."""
    WAIT = "wait"
    """Wait for a wake-up (or a heartbeat), then read again."""
    SWITCH = "switch"
    """Send a `reset` naming the stream's current generation, then follow it from seq 1."""
    AWAIT_NEXT = "await_next"
    """Send a `reset` naming no generation, then wait for one newer than `epoch`."""


class Seen(NamedTuple):
    """The events a read found after the reader's position: the last one's seq, and
    whether every seq from the position up to it is there."""

    last_seq: int
    contiguous: bool = True


class Current(NamedTuple):
    """The stream's current generation, as the read saw it."""

    epoch: int
    whole: bool
    """Every event from seq 1 is still retained (it can be followed from seq 1)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One read's outcome: whether the page found is delivered first, then the move."""

    deliver: bool
    move: Move
    epoch: int
    """The newest epoch the reader has been told of: a generation it waits for is newer."""
    reason: Reason | None = None
    """The `reset`'s reason (SWITCH and AWAIT_NEXT only)."""


def judge(
    gen: Followed | None,
    *,
    after: int,
    seen: Seen | None,
    followed_epoch: int,
    epoch: int,
    current: Current | None,
) -> Turn:
    """Judge one read of the followed generation (the rules in the module docstring).

    `gen` is the followed generation now (None once even its tombstone is gone), `after`
    the last seq the reader was given, `seen` the events after it the read found (None:
    none), `followed_epoch` the followed generation's epoch, `epoch` the reader's, and
    `current` the stream's current generation. Delivering a page that reaches the tail
    settles the rest in the same turn (`end`, a reset when superseded, or wait): reading
    again at once would only find what the read just saw.
    """
    if gen is None or gen.expired:
        return reset(Reason.EXPIRED, followed_epoch=followed_epoch, epoch=epoch, current=current)
    if after < gen.head_seq - 1:
        return reset(Reason.EVICTED, followed_epoch=followed_epoch, epoch=epoch, current=current)
    if seen is not None:
        if not seen.contiguous:
            return reset(
                Reason.EVICTION_HOLE, followed_epoch=followed_epoch, epoch=epoch, current=current
            )
        after = seen.last_seq
        if after < gen.tail_seq:
            return Turn(True, Move.READ_ON, epoch)
    deliver = seen is not None
    if gen.terminal and after >= gen.tail_seq:
        return Turn(deliver, Move.END, epoch)
    if not gen.current:
        return reset(
            Reason.SUPERSEDED,
            followed_epoch=followed_epoch,
            epoch=epoch,
            current=current,
            deliver=deliver,
        )
    if gen.abandoned:
        # Only the recorded mark: every replica's readers then agree with the sweep that
        # recorded it (and are woken by it), whatever their own clocks say.
        return reset(
            Reason.ABANDONED,
            followed_epoch=followed_epoch,
            epoch=epoch,
            current=current,
            deliver=deliver,
        )
    return Turn(deliver, Move.WAIT, epoch)


def reset(
    reason: Reason,
    *,
    followed_epoch: int,
    epoch: int,
    current: Current | None,
    deliver: bool = False,
) -> Turn:
    """A reset, then the stream's current generation from seq 1 when it is newer than
    anything the reader was told of and whole; otherwise wait for a newer one."""
    epoch = max(epoch, followed_epoch)
    if current is not None and current.epoch > epoch and current.whole:
        return Turn(deliver, Move.SWITCH, current.epoch, reason)
    newest = epoch if current is None else max(epoch, current.epoch)
    return Turn(deliver, Move.AWAIT_NEXT, newest, reason)
