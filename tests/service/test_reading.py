"""One read path: for every row of the decision table, explain's verdict is resume's.

Each case builds a state through the API (and, for holes the counters cannot see, through
the tables), then asks the admin explain and the writer resume the same claim: verdict,
reason, delivered generation and the events delivered in all must agree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import delete
from sqlalchemy.ext.asyncio import create_async_engine

from app.domain import ids
from app.domain.decision import DECISION_TABLE, Reason
from app.service import reading
from app.storage.schema import events, generations
from tests.support.writer_calls import append, open_generation, resume

Case = Callable[[httpx.AsyncClient, str], Awaitable[tuple[str, str]]]
"""Builds a state on stream `s` (database at the URL); returns (stream asked, claim)."""


async def _delete_events(url: str, token: str, seqs: range) -> None:
    # A hole the generation's counters do not show: only a page read can find it.
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            pk = (
                await conn.execute(
                    generations.select()
                    .with_only_columns(generations.c.id)
                    .where(generations.c.token == token)
                )
            ).scalar_one()
            await conn.execute(
                delete(events).where(
                    events.c.generation_pk == pk,
                    events.c.seq >= seqs.start,
                    events.c.seq < seqs.stop,
                )
            )
    finally:
        await engine.dispose()


async def _filled(client: httpx.AsyncClient, stream: str, count: int, **options: Any) -> str:
    token: str = (await open_generation(client, stream, **options))["generation"]
    for start in range(0, count, 500):
        await append(
            client, token, [f"{stream}-{i}" for i in range(start, min(count, start + 500))]
        )
    return token


async def malformed(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    return s, "not an id"


async def unknown(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    return s, "AAAAAAAAAAAAAAAAAAAAAA:1"


async def cross_stream(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    token = await _filled(client, f"{s}-other", 2)
    await _filled(client, s, 1)
    return s, f"{token}:1"


async def beyond_tail(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    return s, f"{await _filled(client, s, 2)}:3"


async def superseded(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    old = await _filled(client, s, 3)
    await _filled(client, s, 2, reason="retry")
    return s, f"{old}:1"


async def terminal(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    token = await _filled(client, s, 3)
    await append(client, token, ["last"], terminal=True)
    return s, f"{token}:1"


async def expired(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    token = await _filled(client, s, 3)
    assert (await client.delete(f"/admin/v1/streams/{s}")).status_code == 200
    return s, f"{token}:1"


async def lost_tail(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    # Seq 4 of a live generation whose writer may run 5 ahead: waited for, never stored.
    return s, f"{await _filled(client, s, 2, pipeline=5)}:4"


async def abandoned(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    token = await _filled(client, s, 3, lease_seconds=1)
    await asyncio.sleep(1.2)  # the lease runs out; a resume sees it, swept or not
    return s, f"{token}:1"


async def evicted(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    return s, f"{await _filled(client, s, 5, max_events=2)}:1"


async def ok(client: httpx.AsyncClient, s: str) -> tuple[str, str]:
    return s, f"{await _filled(client, s, 5)}:2"


CASES: dict[Reason, Case] = {
    Reason.MALFORMED_ID: malformed,
    Reason.UNKNOWN_GENERATION: unknown,
    Reason.CROSS_STREAM: cross_stream,
    Reason.BEYOND_TAIL: beyond_tail,
    Reason.LOST_TAIL: lost_tail,
    Reason.ABANDONED: abandoned,
    Reason.SUPERSEDED: superseded,
    Reason.TERMINAL: terminal,
    Reason.EXPIRED: expired,
    Reason.EVICTED: evicted,
    Reason.OK: ok,
}


def test_every_row_but_the_hole_has_a_case() -> None:
    # Row 9 (a hole) needs the database URL: it has its own tests below.
    assert set(CASES) | {Reason.EVICTION_HOLE} == {row.reason for row in DECISION_TABLE}


async def _both(client: httpx.AsyncClient, stream: str, claim: str) -> tuple[Any, Any]:
    answer = await resume(client, claim, stream)
    explained = await client.post(
        "/admin/v1/explain", json={"last_event_id": claim, "stream_id": stream}
    )
    assert explained.status_code == 200, explained.text
    return answer, explained.json()


def _agree(answer: Any, explained: Any) -> None:
    assert (explained["verdict"], explained["reason"]) == (answer["verdict"], answer["reason"])
    delivery = explained["would_deliver"]
    if answer["generation"] is None:
        assert delivery is None
        return
    assert delivery["generation"] == answer["generation"]
    # resume delivers a first page; explain counts every event that resume would page through
    first_seq = answer["events"][0]["seq"] if answer["events"] else answer["tail_seq"] + 1
    assert delivery["after"] == first_seq - 1
    assert delivery["events"] == answer["tail_seq"] - delivery["after"]


@pytest.mark.parametrize("reason", list(CASES), ids=[r.value for r in CASES])
async def test_explain_agrees_with_resume(client: httpx.AsyncClient, reason: Reason) -> None:
    stream, claim = await CASES[reason](client, f"row-{reason.value}")
    answer, explained = await _both(client, stream, claim)
    assert answer["reason"] == reason.value
    _agree(answer, explained)


async def _resumed_over_a_hole(
    client: httpx.AsyncClient, database_url: str, stream: str, count: int, *, hole: int
) -> tuple[str, Any, Any]:
    """`count` events on `stream`, event `hole` deleted under the counters; the generation,
    and what resume and explain from seq 1 say."""
    token = await _filled(client, stream, count)
    await _delete_events(database_url, token, range(hole, hole + 1))
    return token, *await _both(client, stream, f"{token}:1")


async def test_a_hole_in_the_first_page_is_an_eviction_hole_for_both(
    client: httpx.AsyncClient, database_url: str
) -> None:
    _, answer, explained = await _resumed_over_a_hole(client, database_url, "hole", 6, hole=3)
    assert answer["reason"] == "eviction_hole"
    _agree(answer, explained)


async def test_a_hole_past_the_first_page_is_judged_alike(
    client: httpx.AsyncClient, database_url: str
) -> None:
    # Resume checks the page it delivers; a hole beyond it is found by the next page (410).
    # Explain once counted every stored event and said `eviction_hole` here while resume
    # said `ok`: one read path makes them say the same.
    token, answer, explained = await _resumed_over_a_hole(
        client, database_url, "far-hole", 700, hole=650
    )
    assert answer["reason"] == "ok"
    _agree(answer, explained)
    later = await client.get(f"/v1/generations/{token}/events", params={"after": 600})
    assert (later.status_code, later.json()["code"]) == (410, "evicted")


class Counted:
    """Wraps a callable (or an object's `fullmatch`) and counts its calls."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.wrapped(*args, **kwargs)

    def fullmatch(self, raw: str) -> Any:
        self.calls += 1
        return self.wrapped.fullmatch(raw)


async def _hole(client: httpx.AsyncClient, database_url: str) -> tuple[str, str]:
    token = await _filled(client, "once-hole", 6)
    await _delete_events(database_url, token, range(3, 4))
    return "once-hole", f"{token}:1"


# Row 4a is decided again after each change of the stream while it waits for the tail
# (`test_a_claim_within_the_window_waits_for_the_tail` and the real-process tests).
@pytest.mark.parametrize(
    "reason",
    [*(r for r in CASES if r is not Reason.LOST_TAIL), Reason.EVICTION_HOLE],
    ids=lambda r: r.value,
)
async def test_each_read_parses_its_claim_once_and_decides_once(
    client: httpx.AsyncClient, database_url: str, monkeypatch: pytest.MonkeyPatch, reason: Reason
) -> None:
    if reason is Reason.EVICTION_HOLE:
        stream, claim = await _hole(client, database_url)
    else:
        stream, claim = await CASES[reason](client, f"once-{reason.value}")
    decisions = Counted(reading.decide)
    parses = Counted(ids._EVENT_ID)  # every parse of an id of up to 300 chars matches it
    monkeypatch.setattr(reading, "decide", decisions)
    monkeypatch.setattr(ids, "_EVENT_ID", parses)
    answer, explained = await _both(client, stream, claim)  # two reads: resume, explain
    assert answer["reason"] == reason.value
    _agree(answer, explained)
    assert (decisions.calls, parses.calls) == (2, 2)
