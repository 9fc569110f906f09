"""The append rules: where a batch goes, and when it is a retry of one already stored.

Kafka's idempotent producer is the model: a writer that sends `first_seq` can resend a
batch after a timeout, and the log answers "already stored" instead of storing it twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum


class AppendConflict(StrEnum):
    """What in its generation's state a batch conflicts with (the problem `code`)."""

    SUPERSEDED = "superseded"
    TERMINAL = "terminal"
    ABANDONED = "abandoned"
    EXPIRED = "expired"
    SEQ_CONFLICT = "seq_conflict"
    SEQ_GAP = "seq_gap"


# The names of live reads' control events (docs/live.md): a stored event of one of these
# types would reach a browser's `EventSource` listeners of the service's own `reset` and
# `end`, so an append may not use them. Exact names: SSE event types
# are case-sensitive, and `Reset` dispatches to no `reset` listener.
CONTROL_EVENT_TYPES = frozenset({"reset", "end"})


@dataclass(frozen=True, slots=True)
class EventBody:
    """What a writer sends for one event: the SSE `event` type and its `data`."""

    data: str
    event: str | None = None


@dataclass(frozen=True, slots=True)
class GenerationState:
    """A generation's counters and marks, as the rules look at them: the append rules read
    them under the generation's write lock, the resume decision (`GenerationFacts`, which
    adds what it needs) in one snapshot."""

    head_seq: int
    tail_seq: int
    current: bool
    terminal: bool
    terminal_seq: int | None = None
    expired: bool = False
    abandoned: bool = False
    """Its writer's lease ran out while it was neither terminal nor superseded: fenced."""


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """The accepted outcome: store `count` events from `first_seq`, or nothing (duplicate)."""

    first_seq: int
    count: int
    duplicate: bool
    terminal: bool

    @property
    def last_seq(self) -> int:
        """The seq of the last event of the batch (the tail, for an empty batch)."""
        return self.first_seq + self.count - 1


@dataclass(frozen=True, slots=True)
class NotAppended:
    """The other outcome: nothing is appended, because of `conflict` (`detail` for a human)."""

    conflict: AppendConflict
    detail: str


def overlap(state: GenerationState, first_seq: int | None, count: int) -> range:
    """The stored seqs a batch claims to repeat; the store reads these before `plan_append`."""
    if first_seq is None or first_seq > state.tail_seq:
        return range(0)
    return range(max(first_seq, state.head_seq), min(first_seq + count, state.tail_seq + 1))


def plan_append(
    state: GenerationState,
    batch: Sequence[EventBody],
    *,
    first_seq: int | None,
    terminal: bool,
    stored: Mapping[int, EventBody],
) -> AppendPlan | NotAppended:
    """Apply the contract's append rules; `stored` holds the events at `overlap(...)`.

    A verified retry is answered as a duplicate even when the generation has since been
    superseded or finished: the events *are* stored, and the writer must learn that.
    """
    if first_seq is not None and first_seq <= state.tail_seq:
        return _retry(state, batch, first_seq, terminal, stored)
    if _is_repeated_finish(state, batch, first_seq, terminal):
        return AppendPlan(state.tail_seq + 1, 0, duplicate=True, terminal=True)
    refusal = writable(state)
    if refusal is not None:
        return refusal
    expected = state.tail_seq + 1
    if first_seq is not None and first_seq != expected:
        return NotAppended(AppendConflict.SEQ_GAP, f"first_seq {first_seq}, expected {expected}")
    return AppendPlan(expected, len(batch), duplicate=False, terminal=terminal)


def writable(state: GenerationState) -> NotAppended | None:
    """Why nothing new may be written to the generation (an append or a lease renewal),
    or None when its writer may go on."""
    if not state.current:
        return NotAppended(AppendConflict.SUPERSEDED, "a newer generation fenced this one")
    if state.terminal:
        return NotAppended(AppendConflict.TERMINAL, "the generation is terminal")
    if state.abandoned:
        return NotAppended(
            AppendConflict.ABANDONED,
            "the writer's lease ran out and the generation was abandoned; open a new one",
        )
    if state.expired:
        # Its events were purged by the TTL and every resume of it is reset: an event
        # stored now could never be delivered, so it is refused rather than acknowledged.
        return NotAppended(AppendConflict.EXPIRED, "the generation expired; open a new one")
    return None


def _is_repeated_finish(
    state: GenerationState, batch: Sequence[EventBody], first_seq: int | None, terminal: bool
) -> bool:
    # "Finish at the tail" sent again after a lost response: already true, so idempotent.
    return (
        terminal
        and not batch
        and state.terminal
        and first_seq == state.tail_seq + 1
        and state.terminal_seq == state.tail_seq
    )


def _retry(
    state: GenerationState,
    batch: Sequence[EventBody],
    first_seq: int,
    terminal: bool,
    stored: Mapping[int, EventBody],
) -> AppendPlan | NotAppended:
    plan = AppendPlan(first_seq, len(batch), duplicate=True, terminal=terminal)
    if not batch:
        # An empty terminal batch at first_seq <= tail names no event: it can only be a
        # retry of "finish at the tail" when first_seq is exactly tail + 1 (handled above).
        return NotAppended(AppendConflict.SEQ_CONFLICT, "an empty batch must start at tail_seq + 1")
    if plan.last_seq > state.tail_seq:
        return NotAppended(
            AppendConflict.SEQ_CONFLICT, f"the batch overlaps the tail ({state.tail_seq})"
        )
    if first_seq < state.head_seq:
        return NotAppended(
            AppendConflict.SEQ_CONFLICT,
            f"seqs before the head ({state.head_seq}) were evicted; a retry cannot be verified",
        )
    for seq, body in enumerate(batch, start=first_seq):
        if stored.get(seq) != body:
            return NotAppended(
                AppendConflict.SEQ_CONFLICT, f"seq {seq} is stored with other content"
            )
    if terminal and state.terminal_seq != plan.last_seq:
        return NotAppended(AppendConflict.SEQ_CONFLICT, "the stored batch was not terminal")
    return plan
