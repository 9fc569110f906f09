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
from typing import TypeVar

from app.domain.append import GenerationState
from app.domain.ids import EventId

T = TypeVar("T")


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
    LOST_TAIL = "lost_tail"
    ABANDONED = "abandoned"
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
    run up to the tail (no eviction hole). `pipeline` is how many events past its
    acknowledged tail the writer declared it may have shown a client (the Open body's).
    """

    token: str
    stream_id: str
    contiguous: bool = True
    pipeline: int = 0

    @property
    def live(self) -> bool:
        """Whether the generation can still grow: current, not finished, not abandoned and
        not purged (a claim within its window may yet be stored)."""
        return self.current and not self.terminal and not self.abandoned and not self.expired


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the contract's decision table: its place, outcome and condition in words."""

    number: str
    """Its place in the contract's table: "1" … "10", and "4a", "4b" between 4 and 5."""
    reason: Reason
    verdict: Verdict
    condition: str


# The table in words: `explain`, the CLI and the README show these (a test checks the
# README against them); `_predicates` below says what each row means in code.
DECISION_TABLE: tuple[Row, ...] = (
    Row("1", Reason.MALFORMED_ID, Verdict.INVALID, "the id is not `<token>:<seq>`"),
    Row(
        "2",
        Reason.UNKNOWN_GENERATION,
        Verdict.INVALID,
        "no generation has that token (for this tenant)",
    ),
    Row("3", Reason.CROSS_STREAM, Verdict.INVALID, "the token's stream is not the one asked about"),
    Row(
        "4",
        Reason.BEYOND_TAIL,
        Verdict.INVALID,
        "seq > the tail + the generation's `pipeline` (> `terminal_seq` on a terminal one)",
    ),
    Row(
        "4a",
        Reason.LOST_TAIL,
        Verdict.RESET,
        "seq > the tail (within the window) of a live generation, still after waiting for it",
    ),
    Row(
        "4b",
        Reason.ABANDONED,
        Verdict.RESET,
        "the generation is abandoned (its writer's lease ran out) and still current",
    ),
    Row("5", Reason.SUPERSEDED, Verdict.RESET, "the generation was superseded"),
    Row(
        "6", Reason.TERMINAL, Verdict.RESET, "the generation is terminal (`terminal_resume` policy)"
    ),
    Row("7", Reason.EXPIRED, Verdict.RESET, "the generation's events were purged by its TTL"),
    Row("8", Reason.EVICTED, Verdict.RESET, "events after the id were evicted (seq < head - 1)"),
    Row(
        "9",
        Reason.EVICTION_HOLE,
        Verdict.RESET,
        "the retained events after the id are not contiguous",
    ),
    Row("10", Reason.OK, Verdict.RESUME, "otherwise"),
)


@dataclass(frozen=True, slots=True)
class Check:
    """One row of the decision table as it was evaluated."""

    row: str
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
    catch_up: bool = False
    """Row 4a matched on a generation that is still live: the caller may wait (up to
    `EVENTLOG_RESUME_CATCHUP_MS` in all) for a change of the stream and decide again with
    `waited=True`; a caller that does not wait, or whose wait is over, answers this
    decision (`lost_tail`) as it is."""


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
    waited: bool = False,
) -> Decision:
    """Decide a resume claim; rows are checked in the contract's order, first match wins.

    `claim` is the client's `Last-Event-ID` as `parse_event_id` read it (None: malformed),
    parsed once by the caller, which needs it to look the generation up. `asked_stream` is
    the stream the caller asked about (None for `/v1/resume`, which takes the stream from
    the token). `generation` is None when no generation has the token; its `contiguous`
    covers the events a resume would deliver, so it is known before deciding. `waited`:
    the caller is waiting for the tail to reach the claim (row 4a then matches whatever
    befell the generation meanwhile: superseded or abandoned, what the writer showed is
    lost all the same).
    """
    predicates = _predicates(claim, asked_stream, generation, policy, waited)
    checks: list[Check] = []
    for row, predicate in zip(DECISION_TABLE, predicates, strict=True):
        matched = predicate.applies()
        checks.append(Check(row.number, row.reason, row.verdict, matched, row.condition))
        if matched:
            catch_up = row.reason is Reason.LOST_TAIL and generation is not None and generation.live
            detail = predicate.detail()
            return Decision(row.verdict, row.reason, detail, claim, tuple(checks), catch_up)
    raise AssertionError("the last row always matches")  # pragma: no cover


def _predicates(
    claim: EventId | None,
    asked: str | None,
    gen: GenerationFacts | None,
    policy: TerminalPolicy,
    waited: bool,
) -> tuple[_Predicate, ...]:
    # One predicate per row of DECISION_TABLE, in its order. Each runs only after every
    # earlier one returned False, so from row 2 on `claim` is set and from row 3 on `gen`
    # is set; `_known` says so to the type checker.
    return (*_claim_rows(claim, asked, gen, waited), *_state_rows(claim, gen, policy))


def _known(value: T | None) -> T:
    assert value is not None
    return value


def _claim_rows(
    claim: EventId | None, asked: str | None, gen: GenerationFacts | None, waited: bool
) -> tuple[_Predicate, ...]:
    """Rows 1 to 4a: what the claim itself names (its form, its generation, its stream,
    its seq against the tail)."""

    def c() -> EventId:
        return _known(claim)

    def g() -> GenerationFacts:
        return _known(gen)

    def beyond_window() -> bool:
        # A terminal generation's last event is its terminal one: nothing was ever shown
        # after it, so no window applies.
        if g().terminal:
            return c().seq > (g().terminal_seq or g().tail_seq)
        return c().seq > g().tail_seq + g().pipeline

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
            beyond_window,
            lambda: (
                f"seq {c().seq} is beyond the tail ({g().tail_seq}) and the writer's "
                f"window ({g().pipeline}): never emitted"
            ),
        ),
        _Predicate(
            lambda: c().seq > g().tail_seq and (g().live or waited),
            lambda: (
                f"seq {c().seq} is past the tail ({g().tail_seq}), within the writer's "
                "window: shown by the writer and not stored"
            ),
        ),
    )


def _state_rows(
    claim: EventId | None, gen: GenerationFacts | None, policy: TerminalPolicy
) -> tuple[_Predicate, ...]:
    """Rows 4b to 10: what befell the generation, and what of it is still retained."""

    def c() -> EventId:
        return _known(claim)

    def g() -> GenerationFacts:
        return _known(gen)

    def terminal_applies() -> bool:
        if not g().terminal:
            return False
        # Under `replay` only a client that already holds the terminal event is reset;
        # one that is behind falls through to the retention rows below.
        return policy is TerminalPolicy.RESET or c().seq >= g().tail_seq

    return (
        _Predicate(
            lambda: g().abandoned and g().current,
            lambda: "the generation was abandoned (its writer's lease ran out); start over",
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
