"""`EventLogSubscriptionBus`: server events across replicas, through the service.

Real processes: the service, and two MCP servers (`tests.support.bus_server`, the SDK's
`MCPServer` with the bus) as two replicas; the SDK's client speaks 2026-07-28 to them
(`subscriptions/listen` on one, tool calls on the other). The convention is checked
against `tests/fixtures/bus-convention.json`, which the TypeScript bus's tests read too.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.client import Client
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_eventlog_client.mcp import EventLogSubscriptionBus
from mcp_eventlog_client.mcp.bus_events import EVENT_TYPE, STREAM_PREFIX, bus_stream, decode, encode

from tests.support.processes import REPO, ServerProcess, eventlog_service, free_port

FIXTURE = REPO / "tests" / "fixtures" / "bus-convention.json"
KINDS: dict[str, type[ServerEvent]] = {
    "resources_list_changed": ResourcesListChanged,
    "tools_list_changed": ToolsListChanged,
    "prompts_list_changed": PromptsListChanged,
}


def event_of(description: dict[str, Any]) -> ServerEvent:
    """The SDK event a fixture's language-neutral description stands for."""
    if description["kind"] == "resource_updated":
        return ResourceUpdated(uri=description["uri"])
    return KINDS[description["kind"]]()


def test_events_are_stored_as_the_shared_convention_says() -> None:
    convention = json.loads(FIXTURE.read_text())
    assert set(convention) == {"stream_prefix", "event_type", "examples"}
    assert (convention["stream_prefix"], convention["event_type"]) == (STREAM_PREFIX, EVENT_TYPE)
    assert bus_stream() == "mcp-bus.default"
    kinds = set()
    for example in convention["examples"]:
        event = event_of(example["event"])
        assert encode(event) == example["data"]
        assert decode(example["data"]) == event
        kinds.add(example["event"]["kind"])
    assert kinds == {"resource_updated", *KINDS}


@pytest.mark.parametrize("data", ["", "[]", '{"method": "notifications/progress"}', "{bad"])
def test_stored_data_that_is_not_a_server_event_decodes_to_nothing(data: str) -> None:
    assert decode(data) is None


@contextmanager
def bus_server(eventlog: str, workdir: Path, *extra: str) -> Iterator[str]:
    """One replica: the bus test server on a free port; yields its base URL."""
    port = free_port()
    argv = ["-m", "tests.support.bus_server", "--port", str(port), "--eventlog", eventlog, *extra]
    with ServerProcess.program(argv, port=port, log_path=workdir / f"bus-{port}.log") as server:
        yield server.base_url


@pytest.fixture
def eventlog(tmp_path: Path) -> Iterator[str]:
    """A service process of the test's own, on a fresh SQLite database (the bus stream
    starts empty); yields its URL."""
    with eventlog_service(f"sqlite+aiosqlite:///{tmp_path / 'eventlog.db'}", tmp_path) as url:
        yield url


async def record(replica: str) -> dict[str, Any]:
    """What the replica's own listener saw, and its bus's counters."""
    async with httpx.AsyncClient() as http:
        answer: dict[str, Any] = (await http.get(f"{replica}/test/bus")).json()
    return answer


async def seen_on(replica: str, count: int, within: float = 20.0) -> list[str]:
    """The replica's record once it holds `count` events (polled: it is another process)."""
    with anyio.fail_after(within):
        while True:
            seen: list[str] = (await record(replica))["seen"]
            if len(seen) >= count:
                return seen
            await anyio.sleep(0.05)


@asynccontextmanager
async def modern(replica: str) -> AsyncIterator[Client]:
    """The SDK's client on the 2026-07-28 revision (no session, no resumption)."""
    async with Client(f"{replica}/mcp", mode="2026-07-28") as client:
        yield client


@pytest.mark.process
async def test_a_listener_on_one_replica_hears_a_tool_on_the_other(
    eventlog: str, tmp_path: Path
) -> None:
    with bus_server(eventlog, tmp_path) as a, bus_server(eventlog, tmp_path) as b:
        async with (
            modern(b) as on_b,
            modern(a) as on_a,
            on_b.listen(resource_subscriptions=["file:///report.md"]) as listening,
        ):
            await on_a.call_tool("touch", {"uri": "file:///report.md"})
            with anyio.fail_after(10):
                heard = await anext(aiter(listening))
        assert heard == ResourceUpdated(uri="file:///report.md")
        assert (await seen_on(a, 1), await seen_on(b, 1)) == (["file:///report.md"],) * 2


@pytest.mark.process
async def test_each_event_reaches_each_replica_once_in_one_order(
    eventlog: str, tmp_path: Path
) -> None:
    count = 40
    with bus_server(eventlog, tmp_path) as a, bus_server(eventlog, tmp_path) as b:
        async with modern(a) as on_a, modern(b) as on_b, anyio.create_task_group() as tasks:
            # Both replicas publish at once: one stream, one order, each replica's own
            # publishes included exactly once.
            tasks.start_soon(on_a.call_tool, "touch_many", {"prefix": "a/", "count": count})
            tasks.start_soon(on_b.call_tool, "touch_many", {"prefix": "b/", "count": count})
        on_a_seen, on_b_seen = await seen_on(a, 2 * count), await seen_on(b, 2 * count)
        stats = await record(a), await record(b)
    assert on_a_seen == on_b_seen
    assert sorted(on_a_seen) == sorted(
        [f"a/{i}" for i in range(count)] + [f"b/{i}" for i in range(count)]
    )
    assert [uri for uri in on_a_seen if uri.startswith("a/")] == [f"a/{i}" for i in range(count)]
    assert [uri for uri in on_a_seen if uri.startswith("b/")] == [f"b/{i}" for i in range(count)]
    assert (stats[0]["published"], stats[1]["published"]) == (count, count)
    assert all(s["failures"] == {} and s["lagged"] == 0 for s in stats)


@pytest.mark.process
async def test_a_replica_that_starts_late_starts_at_the_tail(eventlog: str, tmp_path: Path) -> None:
    with bus_server(eventlog, tmp_path) as a:
        async with modern(a) as on_a:
            await on_a.call_tool("touch_many", {"prefix": "early/", "count": 5})
            await seen_on(a, 5)
            with bus_server(eventlog, tmp_path) as b:
                await on_a.call_tool("touch", {"uri": "late"})
                assert await seen_on(b, 1) == ["late"]  # nothing before it was replayed
        assert await seen_on(a, 6) == [*(f"early/{i}" for i in range(5)), "late"]


@pytest.mark.process
async def test_the_bus_recovers_from_a_service_restart_and_counts_what_was_lost(
    tmp_path: Path,
) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'eventlog.db'}"
    port = free_port()
    service = eventlog_service(database, tmp_path, port)
    eventlog = service.__enter__()
    try:
        with bus_server(eventlog, tmp_path) as a, bus_server(eventlog, tmp_path) as b:
            async with modern(a) as on_a:
                await on_a.call_tool("touch", {"uri": "before"})
                assert await seen_on(b, 1) == ["before"]
                service.__exit__(None, None, None)
                service = None
                # The tool still succeeds: publishing is fire-and-forget (counted, logged).
                done = await on_a.call_tool("touch", {"uri": "while-down"})
                assert not done.is_error
                service = eventlog_service(database, tmp_path, port)
                service.__enter__()
                # Past the publisher's fast-fail window, and the followers reconnect.
                await anyio.sleep(1.2)
                with anyio.fail_after(30):
                    while True:
                        await on_a.call_tool("touch", {"uri": "after"})
                        if "after" in (await record(b))["seen"]:
                            break
                        await anyio.sleep(0.5)
            on_a_record, on_b_record = await record(a), await record(b)
    finally:
        if service is not None:
            service.__exit__(None, None, None)
    assert "while-down" not in on_b_record["seen"]
    assert on_b_record["seen"][0] == "before"
    assert sum(on_a_record["failures"].values()) >= 1
    assert set(on_a_record["failures"]) <= {"unreachable", "timeout", "outage"}
    # Each event that was stored reached both replicas alike.
    assert on_a_record["seen"] == on_b_record["seen"]


@pytest.mark.process
async def test_retention_is_bounded_and_a_follower_behind_it_rejoins_at_the_tail(
    eventlog: str,
) -> None:
    publisher = EventLogSubscriptionBus(eventlog, max_events=10)
    behind = EventLogSubscriptionBus(eventlog, max_events=10)
    heard: list[ServerEvent] = []
    behind.subscribe(heard.append)
    for index in range(30):
        await publisher.publish(ResourceUpdated(uri=f"r/{index}"))
    view = await publisher.client.stream(bus_stream())
    assert view.current is not None
    assert (view.current.head_seq, view.current.tail_seq) == (21, 30)
    # A follower whose place (seq 1) was evicted meanwhile: it is told `evicted`,
    # counts what it skipped, and rejoins at the tail instead of waiting for ever.
    with anyio.fail_after(10):
        rejoin = await behind._follower.follow(f"{view.current.token}:1")
    assert rejoin is None
    assert (behind.lagged, behind.missed, heard) == (1, 29, [])
    await publisher.client.aclose()
    await behind.client.aclose()


async def test_publish_never_raises_while_the_service_is_unreachable() -> None:
    bus = EventLogSubscriptionBus(f"http://127.0.0.1:{free_port()}", publish_timeout=2)
    await bus.publish(ToolsListChanged())
    await bus.publish(ToolsListChanged())
    assert bus.published == 0
    # The first found the service down; the second failed fast, without waiting.
    assert bus.failures == {"unreachable": 1, "outage": 1}
    await bus.client.aclose()


@pytest.mark.process
async def test_publishers_racing_to_open_the_first_generation_all_get_through(
    eventlog: str,
) -> None:
    buses = [EventLogSubscriptionBus(eventlog) for _ in range(4)]
    async with anyio.create_task_group() as tasks:
        for index, bus in enumerate(buses):
            for step in range(5):
                tasks.start_soon(bus.publish, ResourceUpdated(uri=f"{index}/{step}"))
    view = await buses[0].client.stream(bus_stream())
    for bus in buses:
        await bus.client.aclose()
    assert [bus.failures for bus in buses] == [{}] * 4
    assert [bus.published for bus in buses] == [5] * 4
    # Each found none and opened one at most once; the fenced ones moved to the current.
    assert view.generations <= 4


@pytest.mark.process
async def test_a_follower_never_opens_a_generation_while_the_stream_has_one(
    eventlog: str,
) -> None:
    """An operator finishes the bus generation: the follower waits for the next one (the
    service delivers it from seq 1) instead of opening one itself, which could fence a
    generation a publisher has just appended to."""
    publisher = EventLogSubscriptionBus(eventlog)
    follower = EventLogSubscriptionBus(eventlog)
    heard: list[ServerEvent] = []
    follower.subscribe(heard.append)
    try:
        await _finish_and_publish_again(eventlog, publisher, follower, heard)
    finally:
        await publisher.client.aclose()
        await follower.client.aclose()


async def _finish_and_publish_again(
    eventlog: str,
    publisher: EventLogSubscriptionBus,
    follower: EventLogSubscriptionBus,
    heard: list[ServerEvent],
) -> None:
    await publisher.publish(ResourceUpdated(uri="r/1"))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(follower.follow_forever)
        with anyio.fail_after(10):
            await follower.following.wait()
        first = (await publisher.client.stream(bus_stream())).current
        assert first is not None
        async with httpx.AsyncClient(base_url=eventlog) as admin:
            answer = await admin.post(f"/admin/v1/generations/{first.token}/terminate")
            assert answer.status_code == 200, answer.text
        # Long enough for the follower to hear `end` and take its place again.
        await anyio.sleep(1.0)
        view = await publisher.client.stream(bus_stream())
        assert view.generations == 1
        second = anyio.Event()
        follower.subscribe(lambda event: second.set())
        await publisher.publish(ResourceUpdated(uri="r/2"))
        with anyio.fail_after(10):
            await second.wait()
        tasks.cancel_scope.cancel()
    assert heard == [ResourceUpdated(uri="r/2")]
    assert (await publisher.client.stream(bus_stream())).generations == 2
    assert follower.lagged == 0
