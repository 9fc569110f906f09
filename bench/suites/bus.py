"""The bus: publish → listener latency across two replicas, against the SDK's in-process bus.

`EventLogSubscriptionBus` carries 2026-07-28 server events between MCP server
replicas through the service. Here two buses stand for two replicas: bus A publishes
`ResourceUpdated` events at a steady rate (open loop: each publish is its own task, so a
slow one does not slow the rate), bus B's listener notes when each arrives. A and B talk
to two service processes on one database (SQLite: one file; PostgreSQL, when
`BENCH_POSTGRES_DSN` answers: LISTEN/NOTIFY between them), so the event crosses the
service's replicas too. In the same run the SDK's `InMemorySubscriptionBus` is measured
the same way (one process: no replicas to cross). The TypeScript bus runs the same way
(`clients/typescript/bench/bus.ts`, against the SDK's `InMemoryServerEventBus`), its rows
beside these. Goal: p99 ≤ 50 ms at 200 events/s.

`python -m bench.suites.bus [--quick]` runs it alone; `bench/run.py` runs it in the full bench.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp.server.subscriptions import InMemorySubscriptionBus, SubscriptionBus
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent
from mcp_eventlog_client.mcp import EventLogSubscriptionBus

from app.storage.migrate import upgrade
from bench import alone, servers
from bench.loads.load import latency_summary
from bench.plan import Plan

Results = dict[str, Any]
RATE = 200.0
SECONDS = {"full": 10.0, "quick": 2.0}
GOAL_P99_MS = 50.0


def say(text: str) -> None:
    """One progress line of the run."""
    print(text, flush=True)


async def _latencies(publisher: SubscriptionBus, listener: SubscriptionBus, count: int) -> Results:
    """Publish `count` events at `RATE` through `publisher`; when each reached `listener`."""
    sent: dict[str, float] = {}
    stored: dict[str, float] = {}
    arrived: dict[str, float] = {}
    everything = anyio.Event()

    def note(event: ServerEvent) -> None:
        assert isinstance(event, ResourceUpdated)
        arrived[event.uri] = time.perf_counter()
        if len(arrived) == count:
            everything.set()

    unsubscribe = listener.subscribe(note)
    try:
        async with anyio.create_task_group() as tasks:
            start = time.perf_counter()
            for index in range(count):
                await anyio.sleep(max(0.0, start + index / RATE - time.perf_counter()))
                uri = f"bench://event/{index}"
                sent[uri] = time.perf_counter()
                tasks.start_soon(_publish, publisher, uri, stored)
        with anyio.move_on_after(10):
            await everything.wait()
    finally:
        unsubscribe()
    seconds = [arrived[uri] - at for uri, at in sent.items() if uri in arrived]
    publishing = [stored[uri] - at for uri, at in sent.items() if uri in stored]
    publish = latency_summary(publishing)
    return {
        "events": count,
        "arrived": len(seconds),
        **latency_summary(seconds),
        "publish_p50_ms": publish["p50_ms"],
        "publish_p99_ms": publish["p99_ms"],
    }


async def _publish(bus: SubscriptionBus, uri: str, stored: dict[str, float]) -> None:
    await bus.publish(ResourceUpdated(uri=uri))
    stored[uri] = time.perf_counter()


async def _across(url_a: str, url_b: str, count: int) -> Results:
    async with (
        EventLogSubscriptionBus(url_a, producer="bench-a") as a,
        EventLogSubscriptionBus(url_b, producer="bench-b") as b,
    ):
        with anyio.fail_after(30):
            await a.following.wait()
            await b.following.wait()
        # A short warm-up: connections opened, the bus generation found.
        await _latencies(a, b, 20)
        result = await _latencies(a, b, count)
        result["publish_failures"] = dict(a.failures)
        result["published"] = a.published
        result["lagged"] = b.lagged
    return result


async def _in_process(count: int) -> Results:
    bus = InMemorySubscriptionBus()
    return await _latencies(bus, bus, count)


def _url(server: servers.ServerProcess) -> str:
    return f"http://127.0.0.1:{server.port}"


def _line(name: str, result: Results) -> str:
    return (
        f"  {name:<56} p50 {result['p50_ms']:8.2f} ms  p99 {result['p99_ms']:8.2f} ms"
        f"  (publish returned: p50 {result['publish_p50_ms']:.2f}, p99"
        f" {result['publish_p99_ms']:.2f} ms; {result['arrived']:,}/{result['events']:,} arrived)"
    )


def suite(plan: Plan, workdir: Path) -> Results:
    """Every bus measurement of the plan, printed and returned."""
    count = int(RATE * SECONDS[plan.name])
    say(f"bus: publish → listener latency at {RATE:.0f} events/s, {count:,} events")
    out: Results = {"rate": RATE, "events": count, "goal_p99_ms": GOAL_P99_MS}
    out["sdk_in_process"] = anyio.run(_in_process, count)
    say(_line("SDK InMemorySubscriptionBus (one process)", out["sdk_in_process"]))
    url = f"sqlite+aiosqlite:///{workdir}/bus.db"
    upgrade(url)
    # SQLite: one service process (its other processes would only hear the file's changes
    # at their poll interval); the two buses are the two MCP server replicas.
    with servers.service(url, workdir, name="bus-sqlite") as one:
        out["sqlite_one_service"] = anyio.run(_across, _url(one), _url(one), count)
    say(_line("EventLogSubscriptionBus, 2 buses, 1 service, SQLite", out["sqlite_one_service"]))
    out["postgresql_replicas"] = None
    if servers.postgres_available():
        with servers.throwaway_postgres() as pg, ExitStack() as stack:
            upgrade(pg)
            a = stack.enter_context(servers.service(pg, workdir, name="bus-pg-a"))
            b = stack.enter_context(servers.service(pg, workdir, name="bus-pg-b"))
            out["postgresql_replicas"] = anyio.run(_across, _url(a), _url(b), count)
        say(
            _line(
                "EventLogSubscriptionBus, 2 buses, 2 services, PostgreSQL",
                out["postgresql_replicas"],
            )
        )
    else:
        say("bus: PostgreSQL (BENCH_POSTGRES_DSN) is not answering: its row skipped")
    out["typescript"] = _typescript(SECONDS[plan.name], "sqlite")
    if servers.postgres_available():
        out["typescript"] = {
            **(out["typescript"] or {}),
            **(_typescript(SECONDS[plan.name], "postgresql") or {}),
        }
    for name, row in (out["typescript"] or {}).items():
        say(f"  {name:<56} p50 {row['p50']:8.2f} ms  p99 {row['p99']:8.2f} ms")
    return out


def _typescript(seconds: float, backend: str) -> dict[str, Any] | None:
    """The TypeScript bench (`npm run bench:bus`, its own service processes: one on SQLite,
    two on one PostgreSQL database): the SDK's `InMemoryServerEventBus` and two
    `EventLogServerEventBus` replicas, same rate."""
    try:
        command = ["npm", "run", "--silent", "bench:bus", "--", "--seconds", f"{seconds:g}"]
        command += ["--backend", backend]
        done = subprocess.run(  # noqa: S603 (our own package's script)
            [*command, "--json"],
            cwd=servers.REPO / "clients" / "typescript",
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as error:
        say(f"bus: the TypeScript bench did not run ({type(error).__name__}): its rows skipped")
        return None
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])["figures"]
    across = "1 service, SQLite" if backend == "sqlite" else "2 services, PostgreSQL"
    names = {
        "InMemoryServerEventBus": f"TypeScript SDK InMemoryServerEventBus ({backend} run)",
        "EventLogServerEventBus": f"TypeScript EventLogServerEventBus, 2 buses, {across}",
    }
    return {names.get(name, name): row for name, row in figures.items()}


def table(result: Results | None) -> str:
    """The bus rows of the report (markdown)."""
    if not result:
        return "Bus: not measured in this run."
    lines = [
        f"Bus: publish → listener latency at {result['rate']:.0f} events/s "
        f"(goal p99 ≤ {result['goal_p99_ms']:.0f} ms)",
        "",
        "| bus | p50 | p99 | publish returned p50 / p99 | arrived |",
        "|---|---|---|---|---|",
    ]
    names = {
        "sdk_in_process": "SDK InMemorySubscriptionBus (one process)",
        "sqlite_one_service": "EventLogSubscriptionBus, 2 buses, 1 service, SQLite",
        "postgresql_replicas": "EventLogSubscriptionBus, 2 buses, 2 services, PostgreSQL",
    }
    for key, name in names.items():
        row = result.get(key)
        if row:
            lines.append(
                f"| {name} | {row['p50_ms']:.2f} ms | {row['p99_ms']:.2f} ms | "
                f"{row['publish_p50_ms']:.2f} / {row['publish_p99_ms']:.2f} ms | "
                f"{row['arrived']:,}/{row['events']:,} |"
            )
    for name, row in (result.get("typescript") or {}).items():
        lines.append(
            f"| {name} | {row['p50']:.2f} ms | {row['p99']:.2f} ms | n/a | "
            f"{row['arrived']:,}/{result['events']:,} |"
        )
    return "\n".join(lines)


def main() -> None:
    """`python -m bench.suites.bus [--quick]`: this suite alone."""
    parser = argparse.ArgumentParser(prog="bench.suites.bus", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    plan = alone.plan(parser.parse_args().quick)
    print(table(alone.run(suite, "eventlog-bench-bus-", plan)))


if __name__ == "__main__":
    main()
