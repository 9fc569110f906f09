"""The run: every measurement in one process tree, side by side, in a fixed order.

First the per-message cost table (`bench/suites/append_cost.py`: the append against its ceilings, in
interleaved rounds), the channel's (`bench/suites/channel_cost.py`: the append channel, and the
PostgreSQL append in one statement, against theirs), then resume and replay by stored
history on each database, then the peers (the SDK's in-memory store, Redis Streams), the
live reads, the bus, the TypeScript store over the channel, the TypeScript SDK server with
its stores, the gateway, and the official Python SDK server with each event store.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import seed, servers
from bench.loads.child import measure
from bench.loads.load import latency_summary
from bench.plan import Plan
from bench.suites import (
    append_cost,
    bus,
    channel_cost,
    failover,
    gateway,
    live,
    mcp_overhead,
    peers,
    tasks,
    ts_channel,
    ts_sdk_server,
)

Results = dict[str, Any]


def load(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one load in its own process (`python -m bench.loads.load`) and return its result."""
    return measure("bench.loads.load", spec)


say = append_cost.say


def _resume(plan: Plan, port: int, claims: list[tuple[str, str]]) -> Results:
    return load(
        {
            "kind": "resume",
            "port": port,
            "claims": claims,
            "duration": plan.resume_seconds,
            "max_requests": plan.resume_max_requests,
            "samples": True,
        }
    )


def _pooled(rounds: list[Results]) -> Results:
    samples = [s for r in rounds for s in r["samples_ms"]]
    verdicts: dict[str, int] = {}
    for r in rounds:
        for verdict, n in r["verdicts"].items():
            verdicts[verdict] = verdicts.get(verdict, 0) + n
    return {
        "requests": len(samples),
        "verdicts": verdicts,
        "events_per_resume": rounds[0]["events_per_resume"],
        **latency_summary([s / 1e3 for s in samples]),
        "p50_ms_per_round": [r["p50_ms"] for r in rounds],
        "p99_ms_per_round": [r["p99_ms"] for r in rounds],
    }


def _resume_series(plan: Plan, urls: dict[int, str], logdir: Path) -> Results:
    """Resume latency by stored history: one database and one server per size, side by side.

    Each size has its own database, so the small one is really small; the servers run
    together and the load visits them round-robin, so every size sees the same noise.
    """
    layout = seed.Layout()
    with ExitStack() as stack:
        targets: dict[int, tuple[int, list[tuple[str, str]]]] = {}
        for size, url in urls.items():
            began = time.perf_counter()
            claims = seed.seed_streams(url, "hist", 0, size // layout.events_per_stream, layout)
            say(f"  seeded {size:,} events in {time.perf_counter() - began:.1f}s")
            server = stack.enter_context(servers.service(url, logdir, name=f"resume-{size}"))
            # Resume into early and late streams alike, in a shuffled but fixed order.
            targets[size] = (server.port, sorted(claims, key=lambda c: hash(c[1]) % 1_000_003))
        rounds: dict[int, list[Results]] = {size: [] for size in urls}
        for _ in range(plan.resume_rounds):
            for size, (port, claims) in targets.items():
                rounds[size].append(_resume(plan, port, claims))
    return {str(size): _pooled(rounds[size]) for size in urls}


def _replay(plan: Plan, url: str, logdir: Path) -> Results:
    token = seed.seed_long_generation(url, "replay-tail", plan.replay_events)
    with servers.service(url, logdir, name="service-replay") as server:
        # Warm the process up (imports, pool, caches) before the baseline is taken.
        load(
            {
                "kind": "replay",
                "port": server.port,
                "stream_id": "replay-tail",
                "last_event_id": f"{token}:{plan.replay_events - 10}",
                "limit": plan.replay_page,
            }
        )
        with servers.RssSampler(server.pid) as rss:
            result = load(
                {
                    "kind": "replay",
                    "port": server.port,
                    "stream_id": "replay-tail",
                    "last_event_id": f"{token}:0",
                    "limit": plan.replay_page,
                }
            )
        return {
            **result,
            "rss_baseline_mib": rss.baseline / 2**20,
            "rss_peak_mib": rss.peak / 2**20,
            "rss_growth_mib": rss.growth / 2**20,
        }


def sqlite_suite(plan: Plan, workdir: Path) -> Results:
    """Resume latency by stored history and the long-tail replay, on SQLite."""
    out: Results = {}
    urls = {n: f"sqlite+aiosqlite:///{workdir}/history-{n}.db" for n in plan.resume_sizes}
    for url in urls.values():
        seed.migrate(url)
    say("service on SQLite, resume latency by stored history")
    out["resume"] = _resume_series(plan, urls, workdir)
    say(f"service on SQLite, replay of a {plan.replay_events:,}-event tail")
    out["replay"] = _replay(plan, urls[max(urls)], workdir)
    return out


def postgres_suite(plan: Plan, workdir: Path) -> Results:
    """Resume latency by stored history, on PostgreSQL."""
    out: Results = {}
    say("service on PostgreSQL, resume latency by stored history")
    with ExitStack() as stack:
        urls = {n: stack.enter_context(servers.throwaway_postgres()) for n in plan.resume_sizes}
        for history in urls.values():
            seed.migrate(history)
        out["resume"] = _resume_series(plan, urls, workdir)
    return out


def peer_suite(plan: Plan) -> Results:
    """Item 6: the SDK's in-memory store and Redis Streams at the same sizes."""
    out: Results = {"sdk": {}}
    for size in plan.resume_sizes:
        say(f"SDK InMemoryEventStore, {size:,} events")
        out["sdk"][str(size)] = peers.sdk_store(size, repeats=plan.sdk_repeats)
    if peers.redis_available():
        say("Redis Streams")
        out["redis"] = peers.redis_streams(
            list(plan.resume_sizes),
            duration=plan.peer_seconds,
            max_requests=plan.resume_max_requests,
        )
    else:
        out["redis"] = None
        say("Redis (BENCH_REDIS_URL) is not answering: skipped")
    return out


def _timed(name: str, suite: Callable[[], Results], timings: dict[str, float]) -> Results:
    began = time.perf_counter()
    try:
        return suite()
    finally:
        timings[name] = time.perf_counter() - began


def run(plan: Plan) -> Results:
    """Every suite of the plan; the raw results (the report derives the table)."""
    timings: dict[str, float] = {}
    results: Results = {
        "plan": plan.name,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "loadavg_before": os.getloadavg()},
    }
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="eventlog-bench-")))
        results["append_cost"] = _timed(
            "append_cost", lambda: append_cost.suite(plan, workdir), timings
        )
        results["channel_cost"] = _timed(
            "channel_cost", lambda: channel_cost.suite(plan, workdir), timings
        )
        results["sqlite"] = _timed("sqlite", lambda: sqlite_suite(plan, workdir), timings)
        if servers.postgres_available():
            results["postgresql"] = _timed(
                "postgresql", lambda: postgres_suite(plan, workdir), timings
            )
        else:
            results["postgresql"] = None
            say("PostgreSQL (BENCH_POSTGRES_DSN) is not answering: skipped")
        results["peers"] = _timed("peers", lambda: peer_suite(plan), timings)
        results["live"] = _timed("live", lambda: live.suite(plan, workdir), timings)
        results["bus"] = _timed("bus", lambda: bus.suite(plan, workdir), timings)
        if plan.name == "quick":
            # CI's smoke run stays short: the TypeScript channel, the gateway, the SDK-store and
            # the failover suites run in the full bench, and alone (`python -m
            # bench.suites.ts_channel --quick`, `… gateway --quick`, `… mcp_overhead
            # --sdk-calls`, `… failover --quick`, `… tasks --quick`).
            say(
                "quick plan: the TypeScript channel, gateway, SDK-store, failover and tasks "
                "suites run in the full bench"
            )
        else:
            # The TypeScript store over the append channel (bench/results/ts-channel.*).
            results["ts_channel"] = _timed(
                "ts_channel", lambda: ts_channel.suite(plan, workdir), timings
            )
            ts_channel.write(results["ts_channel"])
            # The TypeScript SDK server with the pipelined store, the per-event store
            # and none (bench/results/ts-sdk-server.*).
            results["ts_sdk_server"] = _timed(
                "ts_sdk_server", lambda: ts_sdk_server.suite(plan, workdir), timings
            )
            ts_sdk_server.write(results["ts_sdk_server"])
            # The gateway against the upstream alone, our store and mcp-persist
            # (bench/results/gateway.md).
            results["gateway"] = _timed("gateway", lambda: gateway.suite(plan, workdir), timings)
            # The official Python SDK server with each event store: pipelined and per-event
            # `EventLogEventStore` and mcp-persist's SQLite store (bench/results/sdk-stores.md).
            results["sdk_stores"] = _timed(
                "sdk_stores", lambda: mcp_overhead.sdk_suite(plan, workdir), timings
            )
            # The recording replica killed mid-call (bench/results/failover.md).
            results["failover"] = _timed("failover", lambda: failover.suite(plan, workdir), timings)
            # The gateway as task host beside a task-less call through it
            # (bench/results/tasks.md).
            results["tasks"] = _timed("tasks", lambda: tasks.suite(plan, workdir), timings)
    results["machine"]["loadavg_after"] = os.getloadavg()
    results["seconds"] = timings
    return results
