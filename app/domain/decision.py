"""The resume decision: may a client that claims `Last-Event-ID` resume from it?

`decide()` is one total function. Every input, however malformed, gets exactly one
`Decision`: a verdict (resume, reset, invalid), the reason code of the first row of the
contract's decision table that matched, and the outcome of every row it looked at (for
`explain`). Invalid input is a returned verdict, never a raised error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from app.domain.ids import EventId, parse_event_id


class Verdict(StrEnum):
    """What the caller does with the client's claim."""

    RESUME = "resume"
    RESET = "reset"
    INVALID = "invalid"


class Reason(StrEnum):
    """Why: one code per row of the decision table."""

    MALFORMED_ID = "malformed_id"
    UNKNOWN_GENERATION = "unknown_generation"
    CROSS_STREAM = "cross_stream"
    BEYOND_TAIL = "beyond_tail"
    SUPERSEDED = "superseded"
    TERMINAL = "terminal"
    EXPIRED = "expired"
    EVICTED = "evicted"
    EVICTION_HOLE = "eviction_hole"
    OK = "ok"


class TerminalPolicy(StrEnum):
    """How a resume into a terminal generation is answered (setting `terminal_resume`)."""

    RESET = "reset"
    REPLAY = "replay"


@dataclass(frozen=True, slots=True)
class GenerationFacts:
    """What the store knows about the generation a claimed id names, in one snapshot.

    `contiguous` is whether the retained events after the claimed seq form an unbroken
    run up to the tail (no eviction hole).
    """

    token: str
    stream_id: str
    head_seq: int
    tail_seq: int
    current: bool
    terminal: bool
    expired: bool
    contiguous: bool = True


@dataclass(frozen=True, slots=True)
class Check:
    """One row of the decision table as it was evaluated."""

    row: int
    reason: Reason
    verdict: Verdict
    matched: bool


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict on one claim, with the rows evaluated to reach it."""

    verdict: Verdict
    reason: Reason
    detail: str
    claim: EventId | None
    checks: tuple[Check, ...]


@dataclass(frozen=True, slots=True)
class _Row:
    reason: Reason
    verdict: Verdict
    applies: Callable[[], bool]
    detail: Callable[[], str]


def decide(
    last_event_id: str,
    *,
    asked_stream: str | None,
    generation: GenerationFacts | None,
    policy: TerminalPolicy = TerminalPolicy.RESET,
) -> Decision:
    """Decide a resume claim; rows are checked in the contract's order, first match wins.

    `asked_stream` is the stream the caller asked about (None for `/v1/resume`, which takes
    the stream from the token). `generation` is None when no generation has the token.
    """
    claim = parse_event_id(last_event_id)
    rows = _table(claim, asked_stream, generation, policy)
    checks: list[Check] = []
    for number, row in enumerate(rows, start=1):
        matched = row.applies()
        checks.append(Check(number, row.reason, row.verdict, matched))
        if matched:
            return Decision(row.verdict, row.reason, row.detail(), claim, tuple(checks))
    raise AssertionError("the last row always matches")  # pragma: no cover


def _table(
    claim: EventId | None,
    asked: str | None,
    gen: GenerationFacts | None,
    policy: TerminalPolicy,
) -> tuple[_Row, ...]:
    # Each predicate runs only after every earlier one returned False, so from row 2 on
    # `claim` is set and from row 3 on `gen` is set; the asserts say so to the type checker.
    def c() -> EventId:
        assert claim is not None
        return claim

    def g() -> GenerationFacts:
        assert gen is not None
        return gen

    def terminal_applies() -> bool:
        if not g().terminal:
            return False
        # Under `replay` only a client that already holds the terminal event is reset;
        # one that is behind falls through to the retention rows below.
        return policy is TerminalPolicy.RESET or c().seq >= g().tail_seq

    return (
        _Row(
            Reason.MALFORMED_ID,
            Verdict.INVALID,
            lambda: claim is None,
            lambda: "the id is not <token>:<seq> (a URL-safe token, a decimal seq, 300 chars)",
        ),
        _Row(
            Reason.UNKNOWN_GENERATION,
            Verdict.INVALID,
            lambda: gen is None,
            lambda: f"no generation has the token {c().token!r}",
        ),
        _Row(
            Reason.CROSS_STREAM,
            Verdict.INVALID,
            lambda: asked is not None and g().stream_id != asked,
            lambda: "the id belongs to another stream than the one asked about",
        ),
        _Row(
            Reason.BEYOND_TAIL,
            Verdict.INVALID,
            lambda: c().seq > g().tail_seq,
            lambda: f"seq {c().seq} is beyond the tail ({g().tail_seq}): never emitted",
        ),
        _Row(
            Reason.SUPERSEDED,
            Verdict.RESET,
            lambda: not g().current,
            lambda: "the generation was superseded by a newer one; start over",
        ),
        _Row(
            Reason.TERMINAL,
            Verdict.RESET,
            terminal_applies,
            lambda: "the generation is terminal; nothing to resume into",
        ),
        _Row(
            Reason.EXPIRED,
            Verdict.RESET,
            lambda: g().expired,
            lambda: "the generation's events were purged by its TTL",
        ),
        _Row(
            Reason.EVICTED,
            Verdict.RESET,
            lambda: c().seq < g().head_seq - 1,
            lambda: f"events after seq {c().seq} were evicted (head is {g().head_seq})",
        ),
        _Row(
            Reason.EVICTION_HOLE,
            Verdict.RESET,
            lambda: not g().contiguous,
            lambda: "the retained events after the id are not contiguous",
        ),
        _Row(Reason.OK, Verdict.RESUME, lambda: True, lambda: "resume after the id"),
    )
