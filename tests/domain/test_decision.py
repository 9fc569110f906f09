"""Every row of the contract's decision table, in order, under both terminal policies."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.domain.decision import (
    GenerationFacts,
    Reason,
    TerminalPolicy,
    Verdict,
    decide,
)
from app.domain.ids import parse_event_id

TOKEN = "AbCdEfGhIjKlMnOpQrStUv"
LIVE = GenerationFacts(
    token=TOKEN,
    stream_id="s1",
    head_seq=1,
    tail_seq=10,
    current=True,
    terminal=False,
    expired=False,
    contiguous=True,
)
EVICTED = replace(LIVE, head_seq=6)  # events 1..5 were evicted
FINISHED = replace(LIVE, terminal=True, terminal_seq=10)
PIPELINED = replace(LIVE, pipeline=5)  # the writer may have shown seqs 11..15 unstored
ABANDONED = replace(PIPELINED, abandoned=True)
RESET, REPLAY = TerminalPolicy.RESET, TerminalPolicy.REPLAY

# (case, last_event_id, asked_stream, facts, policy, verdict, reason)
TABLE = [
    # row 1: malformed ids
    (
        "bare integer (the old format)",
        "47",
        "s1",
        None,
        RESET,
        Verdict.INVALID,
        Reason.MALFORMED_ID,
    ),
    ("empty", "", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    ("no token", ":4", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    ("no seq", f"{TOKEN}:", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    ("negative seq", f"{TOKEN}:-1", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    ("float seq", f"{TOKEN}:1.0", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    ("two colons", f"{TOKEN}:1:2", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    ("bad token char", "ab.cd:1", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    ("unicode digit", f"{TOKEN}:\u0663", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    ("trailing newline", f"{TOKEN}:1\n", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    ("NUL", f"{TOKEN}:1\x00", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    ("301 chars", "a" * 299 + ":1", "s1", None, RESET, Verdict.INVALID, Reason.MALFORMED_ID),
    # row 2: unknown token (spoofed, or another tenant's)
    ("unknown token", "zzzz:1", "s1", None, RESET, Verdict.INVALID, Reason.UNKNOWN_GENERATION),
    (
        "300 chars, unknown",
        "a" * 297 + ":1",
        None,
        None,
        RESET,
        Verdict.INVALID,
        Reason.UNKNOWN_GENERATION,
    ),
    # row 3: the token's stream is another one
    ("cross stream", f"{TOKEN}:1", "s2", LIVE, RESET, Verdict.INVALID, Reason.CROSS_STREAM),
    (
        "cross stream beats beyond tail",
        f"{TOKEN}:99",
        "s2",
        LIVE,
        RESET,
        Verdict.INVALID,
        Reason.CROSS_STREAM,
    ),
    # row 4: beyond the tail
    ("beyond tail", f"{TOKEN}:11", "s1", LIVE, RESET, Verdict.INVALID, Reason.BEYOND_TAIL),
    ("huge seq", f"{TOKEN}:{10**40}", None, LIVE, RESET, Verdict.INVALID, Reason.BEYOND_TAIL),
    (
        "beyond tail beats superseded",
        f"{TOKEN}:11",
        "s1",
        replace(LIVE, current=False),
        RESET,
        Verdict.INVALID,
        Reason.BEYOND_TAIL,
    ),
    # row 4 with a pipeline window: beyond tail + pipeline only
    (
        "beyond the window",
        f"{TOKEN}:16",
        "s1",
        PIPELINED,
        RESET,
        Verdict.INVALID,
        Reason.BEYOND_TAIL,
    ),
    (
        "terminal: no window past terminal_seq",
        f"{TOKEN}:11",
        "s1",
        replace(FINISHED, pipeline=5),
        RESET,
        Verdict.INVALID,
        Reason.BEYOND_TAIL,
    ),
    (
        "beyond the window of an abandoned one",
        f"{TOKEN}:16",
        "s1",
        ABANDONED,
        RESET,
        Verdict.INVALID,
        Reason.BEYOND_TAIL,
    ),
    # row 4a: within the window of a live generation
    ("within the window", f"{TOKEN}:11", "s1", PIPELINED, RESET, Verdict.RESET, Reason.LOST_TAIL),
    (
        "at the window's edge",
        f"{TOKEN}:15",
        None,
        PIPELINED,
        RESET,
        Verdict.RESET,
        Reason.LOST_TAIL,
    ),
    # row 4b: abandoned and still current
    (
        "abandoned, within the window",
        f"{TOKEN}:12",
        "s1",
        ABANDONED,
        RESET,
        Verdict.RESET,
        Reason.ABANDONED,
    ),
    ("abandoned, at tail", f"{TOKEN}:10", "s1", ABANDONED, RESET, Verdict.RESET, Reason.ABANDONED),
    (
        "abandoned beats expired",
        f"{TOKEN}:3",
        "s1",
        replace(ABANDONED, expired=True),
        RESET,
        Verdict.RESET,
        Reason.ABANDONED,
    ),
    (
        "abandoned then superseded: row 5",
        f"{TOKEN}:12",
        "s1",
        replace(ABANDONED, current=False),
        RESET,
        Verdict.RESET,
        Reason.SUPERSEDED,
    ),
    (
        "within the window, superseded: row 5",
        f"{TOKEN}:12",
        "s1",
        replace(PIPELINED, current=False),
        RESET,
        Verdict.RESET,
        Reason.SUPERSEDED,
    ),
    (
        "within the window, expired: row 7",
        f"{TOKEN}:12",
        "s1",
        replace(PIPELINED, expired=True),
        RESET,
        Verdict.RESET,
        Reason.EXPIRED,
    ),
    # row 5: superseded
    (
        "superseded",
        f"{TOKEN}:10",
        "s1",
        replace(LIVE, current=False),
        RESET,
        Verdict.RESET,
        Reason.SUPERSEDED,
    ),
    (
        "superseded beats terminal",
        f"{TOKEN}:3",
        "s1",
        replace(FINISHED, current=False),
        RESET,
        Verdict.RESET,
        Reason.SUPERSEDED,
    ),
    # row 6: terminal, policy reset
    ("terminal, behind", f"{TOKEN}:3", "s1", FINISHED, RESET, Verdict.RESET, Reason.TERMINAL),
    ("terminal, at tail", f"{TOKEN}:10", "s1", FINISHED, RESET, Verdict.RESET, Reason.TERMINAL),
    (
        "terminal beats expired",
        f"{TOKEN}:3",
        "s1",
        replace(FINISHED, expired=True),
        RESET,
        Verdict.RESET,
        Reason.TERMINAL,
    ),
    # row 6: terminal, policy replay
    ("replay: behind, retained", f"{TOKEN}:3", "s1", FINISHED, REPLAY, Verdict.RESUME, Reason.OK),
    (
        "replay: has the terminal event",
        f"{TOKEN}:10",
        "s1",
        FINISHED,
        REPLAY,
        Verdict.RESET,
        Reason.TERMINAL,
    ),
    (
        "replay: behind, evicted",
        f"{TOKEN}:3",
        "s1",
        replace(EVICTED, terminal=True),
        REPLAY,
        Verdict.RESET,
        Reason.EVICTED,
    ),
    (
        "replay: behind, expired",
        f"{TOKEN}:3",
        "s1",
        replace(FINISHED, expired=True),
        REPLAY,
        Verdict.RESET,
        Reason.EXPIRED,
    ),
    (
        "replay: behind, hole",
        f"{TOKEN}:3",
        "s1",
        replace(FINISHED, contiguous=False),
        REPLAY,
        Verdict.RESET,
        Reason.EVICTION_HOLE,
    ),
    # row 7: expired (TTL purge, tombstone kept)
    (
        "expired",
        f"{TOKEN}:3",
        "s1",
        replace(LIVE, expired=True),
        RESET,
        Verdict.RESET,
        Reason.EXPIRED,
    ),
    (
        "expired beats evicted",
        f"{TOKEN}:1",
        "s1",
        replace(EVICTED, expired=True),
        RESET,
        Verdict.RESET,
        Reason.EXPIRED,
    ),
    # row 8: evicted (seq < head - 1)
    ("evicted", f"{TOKEN}:4", "s1", EVICTED, RESET, Verdict.RESET, Reason.EVICTED),
    ("seq 0 after eviction", f"{TOKEN}:0", "s1", EVICTED, RESET, Verdict.RESET, Reason.EVICTED),
    (
        "evicted beats hole",
        f"{TOKEN}:4",
        "s1",
        replace(EVICTED, contiguous=False),
        RESET,
        Verdict.RESET,
        Reason.EVICTED,
    ),
    # row 9: eviction hole
    (
        "hole",
        f"{TOKEN}:5",
        "s1",
        replace(EVICTED, contiguous=False),
        RESET,
        Verdict.RESET,
        Reason.EVICTION_HOLE,
    ),
    # row 10: resume
    ("just before head", f"{TOKEN}:5", "s1", EVICTED, RESET, Verdict.RESUME, Reason.OK),
    ("seq 0, nothing evicted", f"{TOKEN}:0", "s1", LIVE, RESET, Verdict.RESUME, Reason.OK),
    ("at tail: nothing missed", f"{TOKEN}:10", "s1", LIVE, RESET, Verdict.RESUME, Reason.OK),
    ("leading zeros", f"{TOKEN}:007", "s1", LIVE, RESET, Verdict.RESUME, Reason.OK),
    ("no stream asked (/v1/resume)", f"{TOKEN}:3", None, LIVE, RESET, Verdict.RESUME, Reason.OK),
    (
        "empty generation, seq 0",
        f"{TOKEN}:0",
        "s1",
        replace(LIVE, tail_seq=0),
        RESET,
        Verdict.RESUME,
        Reason.OK,
    ),
]


@pytest.mark.parametrize(
    ("last_event_id", "asked", "facts", "policy", "verdict", "reason"),
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_decision_table(
    last_event_id: str,
    asked: str | None,
    facts: GenerationFacts | None,
    policy: TerminalPolicy,
    verdict: Verdict,
    reason: Reason,
) -> None:
    claim = parse_event_id(last_event_id)
    decision = decide(claim, asked_stream=asked, generation=facts, policy=policy)
    assert (decision.verdict, decision.reason) == (verdict, reason)
    assert decision.detail


def test_every_reason_is_covered_by_the_table() -> None:
    assert {row[6] for row in TABLE} == set(Reason)


def test_checks_record_the_rows_in_order_up_to_the_match() -> None:
    decision = decide(parse_event_id(f"{TOKEN}:4"), asked_stream="s1", generation=EVICTED)
    assert [c.row for c in decision.checks] == ["1", "2", "3", "4", "4a", "4b", "5", "6", "7", "8"]
    assert [c.matched for c in decision.checks] == [False] * 9 + [True]
    assert decision.checks[-1].reason is Reason.EVICTED


def test_a_claim_within_the_window_asks_to_catch_up() -> None:
    claim = parse_event_id(f"{TOKEN}:12")
    first = decide(claim, asked_stream="s1", generation=PIPELINED)
    assert (first.verdict, first.reason, first.catch_up) == (
        Verdict.RESET,
        Reason.LOST_TAIL,
        True,
    )
    # Still short and still live while waiting: wait on (or answer lost_tail at the end).
    again = decide(claim, asked_stream="s1", generation=PIPELINED, waited=True)
    assert (again.reason, again.catch_up) == (Reason.LOST_TAIL, True)
    # The tail reached the claim: the table again, from row 4a on.
    caught_up = decide(
        claim, asked_stream="s1", generation=replace(PIPELINED, tail_seq=12), waited=True
    )
    assert (caught_up.verdict, caught_up.catch_up) == (Verdict.RESUME, False)


@pytest.mark.parametrize(
    "meanwhile",
    [
        replace(PIPELINED, current=False),
        ABANDONED,
        replace(PIPELINED, expired=True),
    ],
    ids=["superseded", "abandoned", "expired"],
)
def test_fenced_while_waiting_is_lost_tail(meanwhile: GenerationFacts) -> None:
    claim = parse_event_id(f"{TOKEN}:12")
    decision = decide(claim, asked_stream="s1", generation=meanwhile, waited=True)
    assert (decision.verdict, decision.reason, decision.catch_up) == (
        Verdict.RESET,
        Reason.LOST_TAIL,
        False,
    )


def test_no_other_row_asks_to_catch_up() -> None:
    for _case, last_event_id, asked, facts, policy, _verdict, reason in TABLE:
        decision = decide(
            parse_event_id(last_event_id), asked_stream=asked, generation=facts, policy=policy
        )
        assert decision.catch_up is (reason is Reason.LOST_TAIL)


def test_a_parsed_claim_is_returned() -> None:
    decision = decide(parse_event_id(f"{TOKEN}:7"), asked_stream=None, generation=LIVE)
    assert decision.claim is not None
    assert (decision.claim.token, decision.claim.seq) == (TOKEN, 7)
    assert str(decision.claim) == f"{TOKEN}:7"
    assert decide(parse_event_id("47"), asked_stream=None, generation=None).claim is None
