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

from app.domain.append import GenerationState
from app.domain.ids import EventId


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


class ScopeReason(StrEnum):
    """Why a claim was refused *before* the decision table, by a rule of the front end
    that read it (not a row of the table: `decide()` never returns one)."""

    CROSS_SESSION = "cross_session"
    """The gateway: the claimed generation is a stream of another MCP session (or of the
    same session under another credential)."""


class TerminalPolicy(StrEnum):
    """How a resume into a terminal generation is answered (setting `terminal_resume`)."""

    RESET = "reset"
    REPLAY = "replay"


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationFacts(GenerationState):
    """What the store knows about the generation a claimed id names, in one snapshot: its
    state, and which generation of which stream it is.

    `contiguous` is whether the retained events after the claimed seq form an unbroken
    run up to the tail (no eviction hole).
    """

    token: str
    stream_id: str
    contiguous: bool = True


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the contract's decision table: its place, outcome and condition in words."""

    number: int
    reason: Reason
    verdict: Verdict
    condition: str


# The table in words: `explain`, the CLI and the README show these (a test checks the
# README against them); `_predicates` below says what each row means in code.
DECISION_TABLE: tuple[Row, ...] = (
    Row(1, Reason.MALFORMED_ID, Verdict.INVALID, "the id is not `<token>:<seq>`"),
    Row(
        2,
        Reason.UNKNOWN_GENERATION,
        Verdict.INVALID,
        "no generation has that token (for this tenant)",
    ),
    Row(3, Reason.CROSS_STREAM, Verdict.INVALID, "the token's stream is not the one asked about"),
    Row(4, Reason.BEYOND_TAIL, Verdict.INVALID, "seq > the generation's tail"),
    Row(5, Reason.SUPERSEDED, Verdict.RESET, "the generation was superseded"),
    Row(6, Reason.TERMINAL, Verdict.RESET, "the generation is terminal (`terminal_resume` policy)"),
    Row(7, Reason.EXPIRED, Verdict.RESET, "the generation's events were purged by its TTL"),
    Row(8, Reason.EVICTED, Verdict.RESET, "events after the id were evicted (seq < head - 1)"),
    Row(
        9,
        Reason.EVICTION_HOLE,
        Verdict.RESET,
        "the retained events after the id are not contiguous",
    ),
    Row(10, Reason.OK, Verdict.RESUME, "otherwise"),
)


@dataclass(frozen=True, slots=True)
class Check:
    """One row of the decision table as it was evaluated."""

    row: int
    reason: Reason
    verdict: Verdict
    matched: bool
    condition: str


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict on one claim, with the rows evaluated to reach it."""

    verdict: Verdict
    reason: Reason
    detail: str
    claim: EventId | None
    checks: tuple[Check, ...]


@dataclass(frozen=True, slots=True)
class _Predicate:
    applies: Callable[[], bool]
    detail: Callable[[], str]


def decide(
    claim: EventId | None,
    *,
    asked_stream: str | None,
    generation: GenerationFacts | None,
    policy: TerminalPolicy = TerminalPolicy.RESET,
) -> Decision:
    """Decide a resume claim; rows are checked in the contract's order, first match wins.

    `claim` is the client's `Last-Event-ID` as `parse_event_id` read it (None: malformed),
    parsed once by the caller, which needs it to look the generation up. `asked_stream` is
    the stream the caller asked about (None for `/v1/resume`, which takes the stream from
    the token). `generation` is None when no generation has the token; its `contiguous`
    covers the events a resume would deliver, so it is known before deciding.
    """
    predicates = _predicates(claim, asked_stream, generation, policy)
    checks: list[Check] = []
    for row, predicate in zip(DECISION_TABLE, predicates, strict=True):
        matched = predicate.applies()
        checks.append(Check(row.number, row.reason, row.verdict, matched, row.condition))
        if matched:
            return Decision(row.verdict, row.reason, predicate.detail(), claim, tuple(checks))
    raise AssertionError("the last row always matches")  # pragma: no cover


def _predicates(
    claim: EventId | None,
    asked: str | None,
    gen: GenerationFacts | None,
    policy: TerminalPolicy,
) -> tuple[_Predicate, ...]:
    # One predicate per row of DECISION_TABLE, in its order. Each runs only after every
    # earlier one returned False, so from row 2 on `claim` is set and from row 3 on `gen`
    # is set; the asserts say so to the type checker.
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
        _Predicate(
            lambda: claim is None,
            lambda: "the id is not <token>:<seq> (a URL-safe token, a decimal seq, 300 chars)",
        ),
        _Predicate(
            lambda: gen is None,
            lambda: f"no generation has the token {c().token!r}",
        ),
        _Predicate(
            lambda: asked is not None and g().stream_id != asked,
            lambda: "the id belongs to another stream than the one asked about",
        ),
        _Predicate(
            lambda: c().seq > g().tail_seq,
            lambda: f"seq {c().seq} is beyond the tail ({g().tail_seq}): never emitted",
        ),
        _Predicate(
            lambda: not g().current,
            lambda: "the generation was superseded by a newer one; start over",
        ),
        _Predicate(
            terminal_applies,
            lambda: "the generation is terminal; nothing to resume into",
        ),
        _Predicate(
            lambda: g().expired,
            lambda: "the generation's events were purged by its TTL",
        ),
        _Predicate(
            lambda: c().seq < g().head_seq - 1,
            lambda: f"events after seq {c().seq} were evicted (head is {g().head_seq})",
        ),
        _Predicate(
            lambda: not g().contiguous,
            lambda: "the retained events after the id are not contiguous",
        ),
        _Predicate(lambda: True, lambda: "resume after the id"),
    )
