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
FINISHED = replace(LIVE, terminal=True)
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
    assert [c.row for c in decision.checks] == list(range(1, 9))
    assert [c.matched for c in decision.checks] == [False] * 7 + [True]
    assert decision.checks[-1].reason is Reason.EVICTED


def test_a_parsed_claim_is_returned() -> None:
    decision = decide(parse_event_id(f"{TOKEN}:7"), asked_stream=None, generation=LIVE)
    assert decision.claim is not None
    assert (decision.claim.token, decision.claim.seq) == (TOKEN, 7)
    assert str(decision.claim) == f"{TOKEN}:7"
    assert decide(parse_event_id("47"), asked_stream=None, generation=None).claim is None
