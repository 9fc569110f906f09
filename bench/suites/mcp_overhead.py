"""The latency `EventLogEventStore.store_event` adds to every MCP message.

`python -m bench.suites.mcp_overhead [--messages N] [--large N] [--database-url URL]` starts the
service as a process (a fresh SQLite file with the default settings unless a URL is given),
then stores the same messages, one at a time as the SDK's message router does, through the
SDK's in-memory example store (`bench.baselines.sdk_store`) and through `EventLogEventStore`, in one
run, and prints the per-message latency of each and the difference: progress notifications
(the common case) and 4 MiB tool results (stored as parts of at most 1 MiB). The store
appends over the channel (its default); `--append-transport rest` measures REST.

`python -m bench.suites.mcp_overhead --sdk-calls [--rounds N] [--notifications N] [--concurrent N]
[--single N] [--write]` measures the SDK-store goals instead: the official SDK server
(`bench.baselines.sdk_server`) as a process per store — none, `EventLogEventStore` pipelined (the
default) and per event (both over the channel), and mcp-persist's `SQLiteEventStore` —
and the SDK's client calling its `progress` tool: the wall time of one call streaming 200
progress notifications (median of `--single` calls), and the notifications/s of 16 such
calls at once (16 sessions), in interleaved rounds; the ratios are to the server without
an event store, measured in the same round (`make bench` runs it as `sdk_suite`, into
bench/results/sdk-stores.md).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp.server.streamable_http import EventStore
from mcp_eventlog_client import EventLogClient, NewEvent
from mcp_eventlog_client.mcp import EventLogEventStore, session_scope
from mcp_types import JSONRPCMessage, JSONRPCNotification, JSONRPCResponse

from bench.baselines.sdk_store import InMemoryEventStore

REPO = Path(__file__).resolve().parents[2]


def progress(step: int) -> JSONRPCNotification:
    """A typical streamed message: a progress notification."""
    params = {"progressToken": 7, "progress": step, "total": 1000, "message": f"step {step}"}
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params=params)


def large_result(request_id: int, size: int = 4 * 1024 * 1024) -> JSONRPCResponse:
    """A large tool result: `size` characters of text."""
    text = ("result line 0123456789 abcdefghijklmnopqrstuvwxyz\n" * (size // 50 + 1))[:size]
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)


async def per_append(log: EventLogClient, messages: int) -> list[float]:
    """Seconds each bare `append` took: the service's own share of `store_event`."""
    generation = await log.open_generation("bench.bare")
    timings = []
    for step in range(1, messages + 1):
        event = NewEvent(progress(step).model_dump_json(by_alias=True, exclude_unset=True))
        started = time.perf_counter()
        await log.append(generation.token, [event], first_seq=step)
        timings.append(time.perf_counter() - started)
    return timings


async def per_message(store: EventStore, stream: str, messages: int) -> list[float]:
    """Seconds each `store_event` of a progress notification took, on one stream."""
    timings = []
    await store.store_event(stream, None)  # the priming event opens the generation
    for step in range(1, messages + 1):
        message = progress(step)
        started = time.perf_counter()
        await store.store_event(stream, message)
        timings.append(time.perf_counter() - started)
    return timings


async def per_large_result(store: EventStore, count: int) -> list[float]:
    """Seconds each `store_event` of a 4 MiB result took (one request stream each)."""
    timings = []
    for request_id in range(1000, 1000 + count):
        message: JSONRPCMessage = large_result(request_id)
        await store.store_event(str(request_id), None)
        started = time.perf_counter()
        await store.store_event(str(request_id), message)
        timings.append(time.perf_counter() - started)
    return timings


def summary(timings: list[float]) -> tuple[float, float, float]:
    """Median, mean and p99 in milliseconds."""
    ordered = sorted(timings)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1e3, statistics.fmean(ordered) * 1e3, p99 * 1e3


async def measure(url: str, messages: int, large: int, append_transport: str) -> None:
    """Store the messages through both stores and print the comparison."""
    memory = InMemoryEventStore()
    eventlog = EventLogEventStore(url, append_transport=append_transport)  # type: ignore[arg-type]
    try:
        with session_scope("bench"):
            await per_message(eventlog, "warm-up", 100)  # connections, SQLite page cache
            rows = {
                "in-memory example store": summary(await per_message(memory, "1", messages)),
                "EventLogEventStore": summary(await per_message(eventlog, "1", messages)),
                "(bare client.append)": summary(await per_append(eventlog.client, messages)),
            }
            large_rows = {
                "in-memory example store": summary(await per_large_result(memory, large)),
                "EventLogEventStore": summary(await per_large_result(eventlog, large)),
            }
    finally:
        await eventlog.aclose()
    print(f"store_event, {messages} progress notifications on one stream, one at a time:")
    table(rows)
    print("  (the bare append is the service's round trip: HTTP, validation, one committed")
    print("   transaction; the store adds its scope lookup, lock and JSON encoding on top)")
    print(f"store_event, {large} tool results of 4 MiB (4 parts each), one at a time:")
    table(large_rows)
    print(f"failed stores: {eventlog.failed_stores}; appends over REST instead of the channel:")
    print(f"  {dict(eventlog.append_fallbacks)} (appends: {append_transport})")


def table(rows: dict[str, tuple[float, float, float]]) -> None:
    """Median, mean, p99 per row, and what the store adds to the in-memory example's."""
    print(f"  {'':26} {'median':>9} {'mean':>9} {'p99':>9}")
    for name, (median, mean, p99) in rows.items():
        print(f"  {name:26} {median:7.3f}ms {mean:7.3f}ms {p99:7.3f}ms")
    base, ours = rows["in-memory example store"], rows["EventLogEventStore"]
    added = [mine - theirs for mine, theirs in zip(ours, base, strict=True)]
    print(f"  {'added per message':26} {added[0]:+7.3f}ms {added[1]:+7.3f}ms {added[2]:+7.3f}ms")


SDK_STORES = ("none", "eventlog-pipelined", "eventlog-per_event", "mcp-persist")
"""The stores of the SDK-server comparison, side by side in one run."""
_SERVER_ARGS = {
    "none": ["--store", "none"],
    "memory": ["--store", "memory"],
    "eventlog-pipelined": ["--store", "eventlog", "--durability", "pipelined"],
    "eventlog-per_event": ["--store", "eventlog", "--durability", "per_event"],
    "eventlog-channel": ["--store", "eventlog", "--append-transport", "channel"],
    "eventlog-rest": ["--store", "eventlog", "--append-transport", "rest"],
    "mcp-persist": ["--store", "persist"],
}
SDK_GOALS = {"one_call": 1.5, "concurrent": 0.5}
"""Pipelined store / no store: one call at most 1.5x, 16 concurrent at least 0.5x."""
SDK_RESULTS_MD = REPO / "bench" / "results" / "sdk-stores.md"


@contextmanager
def sdk_server(store: str, eventlog: str, workdir: str | None = None) -> Iterator[str]:
    """`bench.baselines.sdk_server` with `store` (a key of `_SERVER_ARGS`) on a free port;
    yields its MCP endpoint's URL. mcp-persist's SQLite file goes into `workdir` (default: a
    temp dir)."""
    port = _free_port()
    argv = [
        sys.executable,
        "-m",
        "bench.baselines.sdk_server",
        "--port",
        str(port),
        *_SERVER_ARGS[store],
    ]
    if store.startswith("eventlog"):
        argv += ["--eventlog", eventlog]
    with tempfile.TemporaryDirectory(prefix="bench-persist-") as scratch:
        if store == "mcp-persist":
            argv += ["--persist-db", f"{workdir or scratch}/persist-{port}.db"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOG_")}
        child = subprocess.Popen(argv, cwd=REPO, env=env)  # noqa: S603 - our own module
        try:
            _wait_for(f"http://127.0.0.1:{port}/", child, any_status=True)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            child.terminate()
            child.wait(timeout=10)


async def _calls(url: str, notifications: int, concurrent: int, single: int) -> tuple[float, float]:
    """The median seconds of `single` calls one after another in one session, then the
    notifications/s of `concurrent` calls at once, each in a session of its own (the SDK
    stores a session's messages one after another, in its message router)."""
    from contextlib import AsyncExitStack

    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    counted = 0

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal counted
        counted += 1

    async def call(session: ClientSession) -> None:
        result = await session.call_tool(
            "progress", {"n": notifications}, progress_callback=on_progress
        )
        assert not result.is_error, result

    async with AsyncExitStack() as stack:
        sessions = []
        for _ in range(max(concurrent, 1)):
            read, write = await stack.enter_async_context(streamable_http_client(url))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)
        await call(sessions[0])  # warm-up: connections, the store's channel
        times = []
        for _ in range(single):
            started = time.perf_counter()
            await call(sessions[0])
            times.append(time.perf_counter() - started)
        counted = 0
        started = time.perf_counter()
        async with anyio.create_task_group() as tasks:
            for session in sessions:
                tasks.start_soon(call, session)
        elapsed = time.perf_counter() - started
        assert counted == notifications * len(sessions), (counted, notifications)
    return statistics.median(times), counted / elapsed


def sdk_calls(
    database_url: str,
    rounds: int,
    notifications: int,
    concurrent: int,
    *,
    single: int = 5,
    stores: tuple[str, ...] = SDK_STORES,
    workdir: str | None = None,
) -> dict[str, Any]:
    """The SDK-server rows: every store's server up at once, measured in interleaved
    rounds (each round visits every store once, in turn); the raw figures per round."""
    import contextlib

    with service(database_url, "FULL") as eventlog, contextlib.ExitStack() as stack:
        urls = {s: stack.enter_context(sdk_server(s, eventlog, workdir)) for s in stores}
        figures: dict[str, list[tuple[float, float]]] = {store: [] for store in stores}
        for index in range(rounds):
            for store, url in urls.items():
                figures[store].append(anyio.run(_calls, url, notifications, concurrent, single))
            print(f"round {index + 1}/{rounds} done", file=sys.stderr)
    return {
        "rounds": rounds,
        "notifications": notifications,
        "concurrent": concurrent,
        "single_calls": single,
        "loadavg": os.getloadavg(),
        "figures": {store: [list(pair) for pair in pairs] for store, pairs in figures.items()},
    }


def sdk_markdown(out: dict[str, Any]) -> str:
    """The SDK-server table: median (range) of the rounds, ratios to `none` per round."""
    figures = out["figures"]
    base = figures["none"]
    concurrent = out["concurrent"]
    rows = [
        f"| store | one call, ms | ÷ none (goal ≤ {SDK_GOALS['one_call']}) "
        f"| {concurrent} calls, notifications/s | ÷ none (goal ≥ {SDK_GOALS['concurrent']}) |",
        "|---|---|---|---|---|",
    ]
    for store, pairs in figures.items():
        single = [one * 1e3 for one, _ in pairs]
        rate = [many for _, many in pairs]
        slower = [one / b for (one, _), (b, _) in zip(pairs, base, strict=True)]
        share = [many / b for (_, many), (_, b) in zip(pairs, base, strict=True)]
        rows.append(
            f"| {store} | {_spread(single, '.1f')} | {_spread(slower, '.2f')} "
            f"| {_spread(rate, '.0f')} | {_spread(share, '.3f')} |"
        )
    return "\n".join(
        [
            "# The official Python SDK server with each event store"
            " (`bench/suites/mcp_overhead.py`)",
            "",
            f"{out['rounds']} interleaved rounds; one call streaming {out['notifications']} "
            f"progress notifications (median of {out['single_calls']} calls), and "
            f"{concurrent} such calls at once (one session each); median (range) of the "
            "rounds; ratios to the server without a store in the same round. The service "
            "behind `eventlog-*` runs on SQLite `synchronous=FULL`; mcp-persist's "
            "`SQLiteEventStore` runs with its defaults (a commit per event). Load average "
            f"{out['loadavg'][0]:.1f} on {os.cpu_count()} cores: read the ratios.",
            "",
            *rows,
            "",
        ]
    )


def sdk_suite(plan: Any, workdir: Path) -> dict[str, Any]:
    """`make bench`'s SDK-store rows (bench/results/sdk-stores.md)."""
    quick = getattr(plan, "name", "full") == "quick"
    url = f"sqlite+aiosqlite:///{workdir}/sdk-stores.db"
    out = sdk_calls(url, 2 if quick else 5, 200, 16, single=3 if quick else 5, workdir=str(workdir))
    SDK_RESULTS_MD.write_text(sdk_markdown(out))
    return out


def _spread(values: list[float], form: str) -> str:
    return f"{statistics.median(values):{form}} ({min(values):{form}}..{max(values):{form}})"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _wait_for(url: str, child: subprocess.Popen[bytes], *, any_status: bool = False) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            response = httpx.get(url, timeout=1)
            if not any_status:
                response.raise_for_status()
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline or child.poll() is not None:
                raise
            time.sleep(0.05)  # polling a process: there is no event to await


@contextmanager
def service(database_url: str, synchronous: str) -> Iterator[str]:
    """`python -m app serve` on a free loopback port; yields its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOG_")}
    env.update(
        EVENTLOG_DATABASE_URL=database_url,
        EVENTLOG_SQLITE_SYNCHRONOUS=synchronous,
        EVENTLOG_LOG_LEVEL="warning",
    )
    child = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=REPO, env=env
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or child.poll() is not None:
                    raise
                time.sleep(0.05)  # polling a process: there is no event to await
        yield url
    finally:
        child.terminate()
        child.wait(timeout=10)


def main() -> None:
    """Parse the arguments, start the service, measure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--large", type=int, default=20, help="4 MiB results to store")
    parser.add_argument("--database-url", help="default: a fresh SQLite file (migrated)")
    parser.add_argument(
        "--sqlite-synchronous", default="FULL", help="EVENTLOG_SQLITE_SYNCHRONOUS of the service"
    )
    parser.add_argument("--append-transport", choices=("channel", "rest"), default="channel")
    parser.add_argument("--sdk-calls", action="store_true", help="the SDK-store rows instead")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--notifications", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=16)
    parser.add_argument("--single", type=int, default=5, help="sequential calls per round")
    parser.add_argument("--write", action="store_true", help="write bench/results/sdk-stores.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        url = args.database_url or f"sqlite+aiosqlite:///{workdir}/eventlog.db"
        if args.sdk_calls:
            out = sdk_calls(
                url,
                args.rounds,
                args.notifications,
                args.concurrent,
                single=args.single,
                workdir=workdir,
            )
            print(sdk_markdown(out))
            if args.write:
                SDK_RESULTS_MD.write_text(sdk_markdown(out))
            return
        where = url.split("@")[-1]
        print(f"service database: {where} (SQLite synchronous={args.sqlite_synchronous})")
        with service(url, args.sqlite_synchronous) as base:
            anyio.run(measure, base, args.messages, args.large, args.append_transport)


if __name__ == "__main__":
    main()
