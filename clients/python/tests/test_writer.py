"""The typed writer client against the in-process app, on SQLite and PostgreSQL."""

from __future__ import annotations

import httpx
import pytest
from mcp_eventlog_client import (
    EventLogClient,
    Evicted,
    Generation,
    NewEvent,
    SeqConflict,
    SeqGap,
    Superseded,
    TerminalGeneration,
    UnknownGeneration,
    UnknownStream,
    ValidationFailed,
    Verdict,
)

from app.settings import Settings
from tests.support.app import app_client, make_settings


async def test_open_append_resume_page_and_stream_view(client: httpx.AsyncClient) -> None:
    log = EventLogClient(http=client)
    opened = await log.open_generation("sess-1.req-7", producer="tests")
    assert isinstance(opened, Generation)
    assert (opened.stream_id, opened.epoch, opened.head_seq, opened.tail_seq) == (
        "sess-1.req-7",
        1,
        1,
        0,
    )
    appended = await log.append(
        opened.token, [NewEvent("a"), NewEvent("b", event="note")], first_seq=1
    )
    assert appended.event_ids == (f"{opened.token}:1", f"{opened.token}:2")
    assert (appended.tail_seq, appended.duplicate) == (2, False)

    answer = await log.resume(f"{opened.token}:1", stream_id="sess-1.req-7")
    assert (answer.verdict, answer.reason, answer.generation) == (
        Verdict.RESUME,
        "ok",
        opened.token,
    )
    assert [(e.seq, e.event, e.data) for e in answer.events] == [(2, "note", "b")]

    page = await log.page(opened.token, after=0)
    assert [e.data for e in page.events] == ["a", "b"]
    assert page.next_after is None

    view = await log.stream("sess-1.req-7")
    assert view.current is not None
    assert (view.generations, view.current.token, view.current.producer) == (
        1,
        opened.token,
        "tests",
    )


async def test_resume_by_id_alone_names_the_stream(client: httpx.AsyncClient) -> None:
    log = EventLogClient(http=client)
    gen = await log.open_generation("s.by-id")
    await log.append(gen.token, [NewEvent("x")], first_seq=1)
    answer = await log.resume(f"{gen.token}:0")
    assert (answer.verdict, answer.stream_id) == (Verdict.RESUME, "s.by-id")
    assert [e.data for e in answer.events] == ["x"]
    elsewhere = await log.resume(f"{gen.token}:0", stream_id="another")
    assert (elsewhere.verdict, elsewhere.reason) == (Verdict.INVALID, "cross_stream")
    assert elsewhere.events == ()


async def test_reset_verdict_after_supersede(client: httpx.AsyncClient) -> None:
    log = EventLogClient(http=client)
    old = await log.open_generation("s.reset")
    await log.append(old.token, [NewEvent("old")], first_seq=1)
    new = await log.open_generation("s.reset", reason="retry")
    assert new.supersedes == old.token
    answer = await log.resume(f"{old.token}:1", stream_id="s.reset")
    assert (answer.verdict, answer.reason, answer.discard_client_state) == (
        Verdict.RESET,
        "superseded",
        True,
    )
    with pytest.raises(Superseded) as refused:
        await log.append(old.token, [NewEvent("late")], first_seq=2)
    assert (refused.value.status, refused.value.code) == (409, "superseded")


async def test_every_append_refusal_has_its_class(client: httpx.AsyncClient) -> None:
    log = EventLogClient(http=client)
    gen = await log.open_generation("s.refusals")
    await log.append(gen.token, [NewEvent("a")], first_seq=1)
    with pytest.raises(SeqGap):
        await log.append(gen.token, [NewEvent("c")], first_seq=3)
    with pytest.raises(SeqConflict):
        await log.append(gen.token, [NewEvent("not a")], first_seq=1)
    with pytest.raises(UnknownGeneration):
        await log.append("no-such-token", [NewEvent("a")], first_seq=1)
    await log.append(gen.token, [], terminal=True)
    with pytest.raises(TerminalGeneration):
        await log.append(gen.token, [NewEvent("b")], first_seq=2)
    with pytest.raises(UnknownStream):
        await log.stream("never-opened")
    with pytest.raises(ValidationFailed) as invalid:
        await log.open_generation("s.refusals", max_events=0)
    assert invalid.value.status == 422
    assert invalid.value.detail


async def test_events_after_pages_to_the_end_and_eviction_raises(database_url: str) -> None:
    settings: Settings = make_settings(database_url)
    async with app_client(settings) as http:
        log = EventLogClient(http=http)
        gen = await log.open_generation("s.pages", max_events=5)
        await log.append(gen.token, [NewEvent(str(n)) for n in range(1, 8)], first_seq=1)
        seen = [e.data async for e in log.events_after(gen.token, 2, limit=2)]
        assert seen == ["3", "4", "5", "6", "7"]
        with pytest.raises(Evicted) as evicted:
            await log.page(gen.token, after=0)
        assert evicted.value.status == 410
