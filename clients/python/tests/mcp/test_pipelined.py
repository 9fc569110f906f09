"""The pipelined `EventLogEventStore` (the default) with real processes, on both databases.

- A writer killed (`kill -9`) with events shown to its client and not stored: every id
  the client holds is answered `reset` (`lost_tail` or `abandoned`) or `resume` with
  exactly the events it saw — never `invalid`, never another event.
- The SDK's own client, its stream closed by the server mid-call, resumes through the
  pipelined store (the replay waits for what was handed out): every message exactly
  once, in order, one generation without a gap.
- A channel the network drops every few frames: every message stored once, in order.
- A writer alive and silent for three leases: its generation is never abandoned; once
  the writer is gone, it is (the same check, seen failing).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse
from mcp_eventlog_client import EventLogClient, Verdict
from mcp_eventlog_client.mcp import EventLogEventStore, session_scope
from mcp_types import JSONRPCNotification

from tests.support.mcp_raw import PROTOCOL, initialize
from tests.support.processes import (
    ServerProcess,
    mcp_server_process,
)
from tests.support.sdk_session import Progress, call_progress, mcp_client, text_of
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.process

LEASE = 2  # seconds: short, so abandonment is seen within a test
SWEEP = 1
SERVER_ENV = {"EVENTLOG_LEASE_SWEEP_SECONDS": str(SWEEP)}  # of the module's service (`base`)
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Service:
    """The service process, its URL and a workdir for the processes of one test."""

    url: str
    workdir: Path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def service(base: str, tmp_path_factory: pytest.TempPathFactory) -> Service:
    """The module's service process (`base`: on the backend of the param, with a short
    lease sweep) and a workdir."""
    return Service(base, tmp_path_factory.mktemp("pipelined"))


def note(step: int) -> JSONRPCNotification:
    params = {"progressToken": 1, "progress": step}
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params=params)


@dataclass
class Seen:
    """What the client of a call was shown: (event id, data) in order."""

    events: list[tuple[str, str]] = field(default_factory=list)
    flowing: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once 50 events were shown (the stores are flowing)."""


async def _session(http: httpx.AsyncClient, url: str) -> str:
    answer = await http.post(url, json=initialize("pipelined-test"), headers=HEADERS)
    answer.raise_for_status()
    sid = answer.headers["mcp-session-id"]
    headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": PROTOCOL}
    note_body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    (await http.post(url, json=note_body, headers=headers)).raise_for_status()
    return sid


async def _read_call(
    http: httpx.AsyncClient, url: str, sid: str, steps: int, seen: Seen, quiet: asyncio.Event
) -> None:
    """Call `progress(steps)` and keep every event shown; `quiet` is set once no event came
    for a while (the store is waiting for the service)."""
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "progress", "arguments": {"n": steps}, "_meta": {"progressToken": 7}},
    }
    headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": PROTOCOL}
    async with aconnect_sse(http, "POST", url, json=body, headers=headers) as source:
        events = source.aiter_sse().__aiter__()
        while True:
            try:
                async with asyncio.timeout(1.5):
                    event = await events.__anext__()
            except TimeoutError:
                quiet.set()
                continue
            except (StopAsyncIteration, httpx.HTTPError):
                return
            if event.id and event.data:
                seen.events.append((event.id, event.data))
                if len(seen.events) >= 50:
                    seen.flowing.set()


@asynccontextmanager
async def _mcp_server(eventlog: str, workdir: Path, *extra: str) -> AsyncIterator[ServerProcess]:
    process = mcp_server_process(eventlog, workdir, *extra)
    await asyncio.to_thread(process.start)
    try:
        yield process
    finally:
        await asyncio.to_thread(process.stop)


async def _verdicts(log: EventLogClient, seen: Seen) -> list[tuple[str, Any]]:
    """The service's answer for every id the client holds (the last 40 and a sample)."""
    ids = [event_id for event_id, _ in seen.events]
    sample = sorted(set(ids[-40:] + ids[:: max(1, len(ids) // 20)]), key=ids.index)
    return [(event_id, await log.resume(event_id)) for event_id in sample]


def _check_no_invalid_no_wrong_event(seen: Seen, verdicts: list[tuple[str, Any]]) -> set[str]:
    """Every verdict a reset of a lost writer or a true resume; the reasons seen."""
    shown = dict(seen.events)
    order = [event_id for event_id, _ in seen.events]
    reasons = set()
    for event_id, answer in verdicts:
        assert answer.verdict is not Verdict.INVALID, (event_id, answer.reason, answer.detail)
        reasons.add(answer.reason)
        if answer.verdict is Verdict.RESET:
            assert answer.reason in {"lost_tail", "abandoned"}, (event_id, answer.reason)
            continue
        # A resume delivers exactly what the client was shown after the id (as far as
        # it was stored): never another event.
        after = order[order.index(event_id) + 1 :]
        delivered = [(e.id, e.data) for e in answer.events if e.event == "message"]
        assert delivered == [(i, shown[i]) for i in after[: len(delivered)]]
    return reasons


async def test_a_writer_killed_mid_pipeline_leaves_resets_never_invalid_or_wrong_events(
    service: Service,
) -> None:
    with TcpProxy(service.port) as proxy:
        args = ("--lease-seconds", str(LEASE), "--pipeline", "64", "--store-timeout", "60")
        async with (
            _mcp_server(proxy.base_url, service.workdir, *args) as writer,
            httpx.AsyncClient(timeout=30) as http,
        ):
            url = f"{writer.base_url}/mcp"
            sid = await _session(http, url)
            seen, quiet = Seen(), asyncio.Event()
            call = asyncio.create_task(_read_call(http, url, sid, 5000, seen, quiet))
            async with asyncio.timeout(30):
                await seen.flowing.wait()
            # The service becomes unreachable for the writer: it goes on showing events
            # until its window is full, then waits; then it is killed.
            proxy.refusing = True
            await asyncio.to_thread(proxy.cut)
            quiet.clear()
            async with asyncio.timeout(30):
                await quiet.wait()
            shown = len(seen.events)
            await asyncio.to_thread(writer.kill)
            call.cancel()
    async with EventLogClient(service.url) as log:
        early = _check_no_invalid_no_wrong_event(seen, await _verdicts(log, seen))
        last_id = seen.events[-1][0]
        stream_id = (await log.resume(last_id)).stream_id
        assert stream_id is not None
        stored = (await log.stream(stream_id)).current
        assert stored is not None
        # Events were shown and not stored: the kill really lost a pipelined tail.
        assert stored.tail_seq < int(last_id.rsplit(":", 1)[1]), (stored.tail_seq, shown)
        await asyncio.sleep(LEASE + SWEEP + 1)  # the lease runs out; the sweep notices
        late = _check_no_invalid_no_wrong_event(seen, await _verdicts(log, seen))
        after = (await log.stream(stream_id)).current
    assert early <= {"lost_tail", "abandoned", "ok"}
    assert "lost_tail" in early or "abandoned" in early
    assert late == {"abandoned"}
    assert after is not None
    assert after.abandoned


async def test_the_sdk_client_resumes_through_the_pipelined_store_exactly_once(
    service: Service,
) -> None:
    progress = Progress()
    async with (
        _mcp_server(service.url, service.workdir) as writer,
        mcp_client(writer.base_url) as (session, _, _),
    ):
        result = await call_progress(
            session, progress, n=300, close_at=100, tag="once", replay_after="done"
        )
    assert text_of(result) == "counted to 300"
    assert progress.steps == list(range(1, 301))
    generations = {token.rsplit(":", 1)[0] for token in progress.tokens}
    assert len(generations) == 1
    # The priming event, 300 notifications and the result: seqs 1..302, none twice.
    assert [int(token.rsplit(":", 1)[1]) for token in progress.tokens] == list(range(1, 303))


async def test_a_flaky_channel_stores_every_message_once_in_order(service: Service) -> None:
    with TcpProxy(service.port) as proxy:
        store = EventLogEventStore(proxy.base_url, store_timeout=60, pipeline=32)
        try:
            with session_scope("flaky"):
                ids = [await store.store_event("3", None)]
                for step in range(1, 301):
                    ids.append(await store.store_event("3", note(step)))
                    if step % 20 == 0:  # the network drops the channel every ~N frames
                        await asyncio.to_thread(proxy.cut)
                token = ids[0].rsplit(":", 1)[0]
                await store.settle(token)
        finally:
            await store.aclose()
    async with EventLogClient(service.url) as log:
        stored = [e async for e in log.events_after(token, 0)]
    assert store.failed_stores == 0
    assert [e.id for e in stored] == ids
    steps = [json.loads(e.data)["params"]["progress"] for e in stored[1:]]
    assert steps == list(range(1, 301))


async def test_an_idle_writer_is_never_abandoned_and_a_gone_one_is(service: Service) -> None:
    store = EventLogEventStore(service.url, lease_seconds=LEASE)
    store.scopes.bind("session-ended", "ended")
    with session_scope("ended"):
        ended = await store.store_event("4", None)
    store.scopes.unbind("session-ended")  # the session ended: its streams are let go
    with session_scope("idle"):
        first = await store.store_event("9", None)
        token = first.rsplit(":", 1)[0]
        await store.settle(token)
        await asyncio.sleep(3 * LEASE + SWEEP)  # silent for three leases, alive
        second = await store.store_event("9", note(1))
        await store.settle(token)
    async with EventLogClient(service.url) as log:
        alive = await log.resume(second)
        let_go = await log.resume(ended)
        await store.aclose()  # the writer is gone: nothing renews its lease now
        await asyncio.sleep(LEASE + SWEEP + 1)
        gone = await log.resume(second)
    assert second.rsplit(":", 1)[0] == token  # the same generation went on
    assert (alive.verdict, alive.reason) == (Verdict.RESUME, "ok")
    assert store.renewals >= 2
    assert (let_go.verdict, let_go.reason) == (Verdict.RESET, "abandoned")
    assert (gone.verdict, gone.reason) == (Verdict.RESET, "abandoned")
