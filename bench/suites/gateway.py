"""The gateway's cost: one MCP tool call streaming 200 progress notifications
(~200 bytes each) and a result, side by side in one run, against:

- `direct`: the upstream itself (the SDK's `MCPServer`, no event store;
  bench/baselines/gateway_upstream.py),
- `gateway-sqlite`: `mcp-eventlog gateway` in front of it on SQLite (`synchronous=FULL`),
- `gateway-postgresql`: the same on PostgreSQL,
- `eventlog-store`: the same upstream with our HTTP `EventLogEventStore` (service on SQLite FULL),
- `mcp-persist`: mcp-persist's `PersistenceProxy` with its SQLite store in front of it.

For each: the wall time of one call (median of sequential calls) and the message rate of
16 concurrent calls (each on its own session), and their ratios to `direct` (goals: one
call <= 1.25x, 16 concurrent >= 0.7x). Then the gateway's RSS with 500 open sessions
(each with its standalone GET stream). Results go to bench/results/gateway.md too.
The load is raw HTTP (httpx) speaking MCP's Streamable HTTP, the same for every target.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]

from bench import alone
from bench.loads.payload import progress_call
from bench.servers import REPO, ServerProcess, free_port, postgres_available, throwaway_postgres

Results = dict[str, Any]
STEPS = 200
PAD = 100  # with the JSON around it, each progress message is ~200 bytes
CONCURRENCY = 16
SESSIONS = 500
PROTOCOL = "2025-11-25"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
RESULTS_MD = REPO / "bench" / "results" / "gateway.md"


def say(text: str) -> None:
    """Progress on stderr (stdout is the report's)."""
    print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _process(
    name: str, argv: list[str], port: int, env: dict[str, str], logdir: Path
) -> Iterator[int]:
    """Run `argv` (listening on `port`) until the block ends; yields its pid once `/healthz`
    answers at all (an MCP server may answer it 404)."""
    server = ServerProcess.program(
        argv[1:], port=port, log_path=logdir / f"{name}-{port}.log", env=env
    )
    server.executable = argv[0]
    server.ready_path, server.ready_status = "/healthz", None
    server.start_timeout = 60.0
    with server:
        assert server.pid is not None
        yield server.pid


def _eventlog_env(database_url: str) -> dict[str, str]:
    return {
        "EVENTLOG_DATABASE_URL": database_url,
        "EVENTLOG_MIGRATE_ON_START": "true",
        "EVENTLOG_SQLITE_SYNCHRONOUS": "FULL",
        "EVENTLOG_LOG_LEVEL": "warning",
        "EVENTLOG_ACCESS_LOG": "false",
    }


# The load: raw Streamable HTTP, the same for every target.


async def _post(http: httpx.AsyncClient, url: str, sid: str | None, body: dict[str, Any]) -> int:
    """POST one JSON-RPC message; the number of messages that came back (SSE or JSON)."""
    headers = {
        **HEADERS,
        "mcp-protocol-version": PROTOCOL,
        **({"mcp-session-id": sid} if sid else {}),
    }
    messages = 0
    async with http.stream("POST", url, json=body, headers=headers) as response:
        response.raise_for_status()
        if "text/event-stream" not in response.headers.get("content-type", ""):
            await response.aread()
            return 1 if response.content else 0
        async for line in response.aiter_lines():
            if line.startswith("data:") and len(line) > 6:
                messages += 1
                if '"result"' in line or '"error"' in line:
                    message = json.loads(line[5:])
                    if message.get("id") == body.get("id"):
                        break
    return messages


async def _session(http: httpx.AsyncClient, url: str) -> str:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }
    headers = {**HEADERS}
    async with http.stream("POST", url, json=init, headers=headers) as response:
        response.raise_for_status()
        sid = response.headers["mcp-session-id"]
        await response.aread()
    await _post(http, url, sid, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return sid


async def _call(http: httpx.AsyncClient, url: str, sid: str, rid: int) -> int:
    return await _post(http, url, sid, progress_call(rid, {"n": STEPS, "pad": PAD}))


async def _one_call(url: str, calls: int) -> Results:
    async with httpx.AsyncClient(timeout=60) as http:
        sid = await _session(http, url)
        await _call(http, url, sid, 1)  # warm-up
        walls = []
        for rid in range(2, calls + 2):
            began = time.perf_counter()
            messages = await _call(http, url, sid, rid)
            walls.append(time.perf_counter() - began)
        assert messages == STEPS + 1, messages
    return {"median_ms": statistics.median(walls) * 1e3, "calls": calls}


async def _concurrent(url: str, seconds: float) -> Results:
    limits = httpx.Limits(max_connections=CONCURRENCY * 2)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        sids = [await _session(http, url) for _ in range(CONCURRENCY)]
        counts = [0] * CONCURRENCY
        deadline = time.perf_counter() + seconds

        async def worker(index: int) -> None:
            rid = 10
            while time.perf_counter() < deadline:
                rid += 1
                counts[index] += await _call(http, url, sids[index], rid)

        began = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(CONCURRENCY)))
        elapsed = time.perf_counter() - began
    return {"messages": sum(counts), "seconds": elapsed, "rate": sum(counts) / elapsed}


async def _open_sessions(url: str, pid: int, count: int, within: float) -> Results:
    """`count` sessions, each with its standalone GET stream open (25 opened at a time, for
    at most `within` seconds); the RSS of `pid` before and with them."""
    process = psutil.Process(pid)
    before = process.memory_info().rss
    limits = httpx.Limits(max_connections=count * 2 + 10, max_keepalive_connections=count * 2)
    opened = 0
    began = time.perf_counter()
    async with (
        httpx.AsyncClient(timeout=60, limits=limits) as http,
        contextlib.AsyncExitStack() as stack,
    ):

        async def one() -> None:
            nonlocal opened
            sid = await _session(http, url)
            headers = {
                "accept": "text/event-stream",
                "mcp-session-id": sid,
                "mcp-protocol-version": PROTOCOL,
            }
            response = await stack.enter_async_context(http.stream("GET", url, headers=headers))
            opened += response.status_code == 200

        while opened < count and time.perf_counter() - began < within:
            await asyncio.gather(*(one() for _ in range(min(25, count - opened))))
        await asyncio.sleep(1)
        held = process.memory_info().rss
        seconds = time.perf_counter() - began
    return {
        "sessions": opened,
        "get_streams_open": opened,
        "seconds_to_open": seconds,
        "rss_before_mib": before / 2**20,
        "rss_with_sessions_mib": held / 2**20,
        "per_session_kib": (held - before) / max(opened, 1) / 1024,
    }


def _measure(name: str, url: str, quick: bool, out: Results) -> Results:
    say(f"  {name}: one call, then {CONCURRENCY} concurrent")
    one = asyncio.run(_one_call(url, 3 if quick else 9))
    many = asyncio.run(_concurrent(url, 2.0 if quick else 6.0))
    out["targets"][name] = {"one_call": one, "concurrent": many}
    write_markdown(out)  # after each target: a run cut short still leaves its figures
    result: Results = out["targets"][name]
    return result


def suite(plan: Any, workdir: Path) -> Results:
    """Every target in turn (one at a time, so each has the machine), then the RSS."""
    quick = getattr(plan, "name", "full") == "quick"
    out: Results = {"steps": STEPS, "pad": PAD, "concurrency": CONCURRENCY, "targets": {}}
    say("gateway: direct vs gateway vs EventLogEventStore vs mcp-persist")
    with contextlib.ExitStack() as stack:
        up_port = free_port()
        argv = [sys.executable, "-m", "bench.baselines.gateway_upstream", "--port", str(up_port)]
        stack.enter_context(_process("upstream", argv, up_port, {}, workdir))
        upstream = f"http://127.0.0.1:{up_port}"
        _measure("direct", f"{upstream}/mcp", quick, out)

        def gateway(name: str, database_url: str) -> tuple[str, int]:
            port = free_port()
            argv = [
                sys.executable,
                "-m",
                "app",
                "gateway",
                "--upstream",
                f"{upstream}/mcp",
                "--port",
                str(port),
            ]
            pid = stack.enter_context(
                _process(name, argv, port, _eventlog_env(database_url), workdir)
            )
            return f"http://127.0.0.1:{port}/mcp", pid

        url, pid = gateway("gateway-sqlite", f"sqlite+aiosqlite:///{workdir}/gateway.db")
        _measure("gateway-sqlite", url, quick, out)
        say(f"  gateway-sqlite: {SESSIONS} open sessions")
        try:
            out["rss_500_sessions"] = asyncio.run(
                _open_sessions(url, pid, SESSIONS, 40.0 if quick else 90.0)
            )
        except Exception as error:  # a figure we could not take is reported
            out["rss_500_sessions"] = {"error": repr(error)}
        if postgres_available():
            pg = stack.enter_context(throwaway_postgres())
            url, _ = gateway("gateway-postgresql", pg)
            _measure("gateway-postgresql", url, quick, out)

        service_port = free_port()
        service_argv = [sys.executable, "-m", "app", "serve", "--port", str(service_port)]
        env = _eventlog_env(f"sqlite+aiosqlite:///{workdir}/store.db")
        stack.enter_context(_process("service", service_argv, service_port, env, workdir))
        store_port = free_port()
        argv = [
            sys.executable,
            "-m",
            "bench.baselines.gateway_upstream",
            "--port",
            str(store_port),
            "--eventlog",
            f"http://127.0.0.1:{service_port}",
        ]
        stack.enter_context(_process("upstream-store", argv, store_port, {}, workdir))
        _measure("eventlog-store", f"http://127.0.0.1:{store_port}/mcp", quick, out)

        port = free_port()
        proxy = str(Path(sys.executable).parent / "mcp-persist-proxy")
        argv = [
            proxy,
            "--upstream",
            upstream,
            "--backend",
            "sqlite",
            "--url",
            f"{workdir}/persist.db",
        ]
        argv += ["--host", "127.0.0.1", "--port", str(port)]
        stack.enter_context(_process("mcp-persist", argv, port, {}, workdir))
        _measure("mcp-persist", f"http://127.0.0.1:{port}/mcp", quick, out)
    write_markdown(out)
    return out


def write_markdown(out: Results) -> None:
    """bench/results/gateway.md: the table of this run (so far), ratios to `direct`."""
    alone.write_markdown(RESULTS_MD, markdown, out)


def markdown(out: Results | None) -> str:
    """The gateway's table (ratios to `direct`) and its RSS line, as Markdown."""
    if not out or "targets" not in out:
        return "Gateway: not measured in this run."
    direct = out["targets"].get("direct")
    for result in out["targets"].values():
        if direct is not None:
            one, rate = result["one_call"]["median_ms"], result["concurrent"]["rate"]
            result["one_call_ratio"] = one / direct["one_call"]["median_ms"]
            result["rate_ratio"] = rate / direct["concurrent"]["rate"]
    rows = [
        "| target | one call, median ms | x direct (goal ≤ 1.25) "
        "| 16 concurrent, msg/s | x direct (goal ≥ 0.7) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in out["targets"].items():
        rows.append(
            f"| {name} | {r['one_call']['median_ms']:.0f} | {r['one_call_ratio']:.2f} "
            f"| {r['concurrent']['rate']:.0f} | {r['rate_ratio']:.2f} |"
        )
    rss = out.get("rss_500_sessions", {})
    rss_line = (
        f"Gateway (SQLite) RSS with {rss['sessions']} open sessions (each with its GET "
        f"stream open): {rss['rss_with_sessions_mib']:.0f} MiB (from "
        f"{rss['rss_before_mib']:.0f} MiB, {rss['per_session_kib']:.0f} KiB a session; "
        f"{rss['seconds_to_open']:.0f} s to open them)."
        if "sessions" in rss
        else f"Gateway RSS at {SESSIONS} sessions: not measured ({rss.get('error')})."
    )
    return "\n".join(
        [
            "# The gateway's cost (`make bench`, bench/suites/gateway.py)",
            "",
            f"One tool call streaming {out['steps']} progress notifications (~200 bytes each) "
            "and a result; every target in front of the same SDK server (no event store "
            "of its own, except `eventlog-store`, which is that server with our HTTP "
            "`EventLogEventStore`). "
            f"Taken on a shared 2-core machine (load average {out.get('loadavg', [0.0])[0]:.1f}): "
            "read the ratios, not the absolute figures.",
            "",
            *rows,
            "",
            rss_line,
            "",
        ]
    )


def main() -> None:
    """`python -m bench.suites.gateway [--quick]`: this suite alone."""
    out = alone.run(suite, "eventlog-bench-gateway-", alone.plan())
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
