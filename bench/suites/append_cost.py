"""The per-message cost of a durable append, against its ceilings.

Every figure is measured in one run, side by side, in interleaved rounds (each round
runs every side once, back to back), so a noisy moment of the shared machine hits both
sides of a ratio; each ratio is the median of the per-round ratios, printed with its
range. The servers under test all run at once, each its own process on 127.0.0.1:

- the no-op endpoint (`bench/baselines/noop.py`: FastAPI + uvicorn, the service's `AppendRequest`
  body model, stores nothing);
- the service on SQLite (`synchronous=FULL`, WAL: the defaults) and on PostgreSQL (one
  process, its default pool);
- the raw ceilings: SQLite written in-process with the stdlib driver (`bench/baselines/ceilings.py`)
  and PostgreSQL driven by `pgbench` with the append's own statements (`bench/baselines/pgraw.py`).

The load is `wrk` (`bench/loads/wrk.py`; the Python load process when wrk is missing, which
the report says). Every connection appends to its own generation, opened before the
timed window with `max_events` high enough that no append evicts.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import ratios, seed, servers
from bench.baselines import ceilings, pgraw
from bench.loads import wrk
from bench.plan import Plan

Results = dict[str, Any]
CLIENTS_TIMEOUT_S = 300


def say(message: str) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def open_generations(port: int, prefix: str, n: int) -> list[str]:
    """Open `n` generations (streams `prefix-0 …`) on the service; their tokens."""
    tokens = []
    for i in range(n):
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/streams/{prefix}-{i}/generations",
            data=json.dumps({"max_events": 1_000_000}).encode(),
            headers={"content-type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (http, loopback)
            tokens.append(json.loads(response.read())["generation"])
    return tokens


def clients_process(spec: dict[str, Any]) -> Results:
    """Run `python -m bench.suites.clients` with `spec`; its JSON result."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.suites.clients"],
        input=json.dumps(spec).encode(),
        capture_output=True,
        cwd=servers.REPO,
        timeout=CLIENTS_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"bench.suites.clients {spec['kind']} failed:\n{done.stderr.decode()[-3000:]}"
        )
    result: Results = json.loads(done.stdout)
    return result


def _interleave(rounds: int, sides: dict[str, Callable[[], Results]]) -> list[dict[str, Results]]:
    out = []
    for index in range(rounds):
        this: dict[str, Results] = {}
        for name, measure in sides.items():
            this[name] = measure()
        out.append(this)
        say(f"  round {index + 1}/{rounds}: " + ", ".join(_brief(k, v) for k, v in this.items()))
    return out


def _brief(name: str, result: Results) -> str:
    if result.get("connections") == 1 or "latency_samples" in result:
        return f"{name} p50 {result['p50_ms']:.2f} ms"
    if "store_event" in result:
        return f"store_event p50 {result['store_event']['p50_ms']:.2f} ms"
    if "events_per_s" in result:
        return f"{name} {result['events_per_s']:,.0f}/s"
    return name


def suite(plan: Plan, workdir: Path) -> Results:
    """Every row of the table, with its ceiling, per round."""
    out: Results = {"load": wrk.tool(), "load_fallback_reason": wrk.fallback_reason()}
    if out["load_fallback_reason"]:
        say(f"load: the Python load process, because {out['load_fallback_reason']}")
    sqlite_url = f"sqlite+aiosqlite:///{workdir}/cost.db"
    seed.migrate(sqlite_url)
    with ExitStack() as stack:
        noop = stack.enter_context(servers.noop(workdir))
        sq = stack.enter_context(servers.service(sqlite_url, workdir, name="service-sqlite"))
        pg = pg_url = None
        if servers.postgres_available() and pgraw.available():
            pg_url = stack.enter_context(servers.throwaway_postgres())
            seed.migrate(pg_url)
            pgraw.seed(pg_url, plan.single_concurrency)
            pg = stack.enter_context(servers.service(pg_url, workdir, name="service-pg"))
        else:
            say("PostgreSQL or pgbench is missing: the PostgreSQL rows are skipped")
        out["postgresql"] = pg is not None
        n = plan.single_concurrency
        noop16 = [f"noop-{i}" for i in range(n)]
        sq16 = open_generations(sq.port, "sq16", n)
        sq1 = open_generations(sq.port, "sq1", 2)
        sqb = open_generations(sq.port, "sqb", plan.batch_concurrency)
        pg16 = open_generations(pg.port, "pg16", n) if pg else []
        pg1 = open_generations(pg.port, "pg1", 1) if pg else []

        def append(port: int, tokens: list[str], *, batch: int = 1, seconds: float) -> Results:
            return wrk.append(port, tokens, batch=batch, seconds=seconds)

        if plan.warmup_seconds > 0:
            say("warming every server up")
            for port, tokens in ((noop.port, noop16), (sq.port, sq16)) + (
                ((pg.port, pg16),) if pg else ()
            ):
                wrk.append(port, tokens, batch=1, seconds=plan.warmup_seconds)

        say(f"1-2. one-event appends, {n} connections: no-op, SQLite, PostgreSQL, pgbench")
        sides: dict[str, Callable[[], Results]] = {
            "noop": lambda: append(noop.port, noop16, seconds=plan.append_seconds),
            "sqlite": lambda: append(sq.port, sq16, seconds=plan.append_seconds),
        }
        if pg is not None and pg_url is not None:
            url = pg_url
            sides["postgresql"] = lambda: append(pg.port, pg16, seconds=plan.append_seconds)
            sides["pgbench"] = lambda: pgraw.run(url, clients=n, seconds=plan.append_seconds)
        sides["raw_sqlite_1"] = lambda: _raw_sqlite(plan, workdir, 1)
        out["throughput"] = _interleave(plan.rounds, sides)

        say("3-4. one-event appends, 1 connection, latency: no-op, SQLite, PostgreSQL, pgbench")
        sides = {
            "noop": lambda: append(noop.port, noop16[:1], seconds=plan.latency_seconds),
            "sqlite": lambda: append(sq.port, sq1[:1], seconds=plan.latency_seconds),
        }
        if pg is not None and pg_url is not None:
            url = pg_url
            sides["postgresql"] = lambda: append(pg.port, pg1, seconds=plan.latency_seconds)
            sides["pgbench"] = lambda: pgraw.run(
                url, clients=1, seconds=plan.latency_seconds, latencies=True
            )
        out["latency"] = _interleave(plan.rounds, sides)

        say("5. EventLogEventStore.store_event vs the service's own p50 (SQLite), sequential")

        def store_event() -> Results:
            result = clients_process(
                {
                    "kind": "store_event",
                    "port": sq.port,
                    "blocks": 1,
                    "requests": plan.client_requests,
                }
            )
            return {"store_event": result["store_event"], "client_append": result["client_append"]}

        sides = {
            "service": lambda: append(sq.port, sq1[1:], seconds=plan.latency_seconds),
            "clients": store_event,
        }
        out["client"] = _interleave(plan.rounds, sides)

        say("5b. HTTP clients on the no-op endpoint, one request at a time")
        out["http_clients"] = clients_process(
            {
                "kind": "clients",
                "port": noop.port,
                "blocks": plan.rounds,
                "requests": plan.client_requests,
            }
        )

        say(f"6. {plan.batch}-event appends: raw SQLite transactions and the service")
        sides = {
            "raw_sqlite": lambda: _raw_sqlite(plan, workdir, plan.batch),
            "sqlite": lambda: append(sq.port, sqb, batch=plan.batch, seconds=plan.append_seconds),
        }
        out["batch"] = _interleave(plan.rounds, sides)
    out["rows"] = rows(out, plan)
    return out


_raw_index = 0


def _raw_sqlite(plan: Plan, workdir: Path, batch: int) -> Results:
    global _raw_index
    _raw_index += 1
    path = workdir / f"raw-{batch}-{_raw_index}.db"
    url = f"sqlite+aiosqlite:///{path}"
    seed.migrate(url)
    result = ceilings.raw_sqlite_append(str(path), url, batch=batch, duration=plan.raw_seconds)
    path.unlink(missing_ok=True)
    return result


def rows(out: Results, plan: Plan) -> list[Results]:
    """The table's rows: figure, ceiling, ours, ratio (median and range), goal, met."""
    table: list[Results] = []
    thr, lat, cli, bat = out["throughput"], out["latency"], out["client"], out["batch"]
    n = plan.single_concurrency
    table.append(
        ratios.row(
            f"one-event append, {n} connections, SQLite FULL",
            "no-op FastAPI app, same body model",
            *ratios.compare(thr, "noop", "sqlite", "requests_per_s"),
            "≥ 0.5x",
            unit="req/s",
        )
    )
    if out["postgresql"]:
        table.append(
            ratios.row(
                "the same on PostgreSQL (one process)",
                f"raw SQL, same statements, pgbench -c{n} -M prepared",
                *ratios.compare(thr, "pgbench", "postgresql", "requests_per_s"),
                "≥ 0.4x",
                unit="req/s",
            )
        )
    table.append(
        ratios.row(
            "one-event append, 1 connection, p50, SQLite",
            "no-op p50",
            *ratios.compare(lat, "noop", "sqlite", "p50_ms"),
            "≤ 2.5x",
            unit="ms",
        )
    )
    if out["postgresql"]:
        table.append(
            ratios.row(
                "the same on PostgreSQL",
                "no-op p50 + raw transaction p50 (pgbench -c1)",
                *ratios.summed_floor(
                    lat, "postgresql", [r["noop"]["p50_ms"] + r["pgbench"]["p50_ms"] for r in lat]
                ),
                "≤ 1.5x",
                unit="ms",
            )
        )
    added = [r["clients"]["store_event"]["p50_ms"] - r["service"]["p50_ms"] for r in cli]
    bare = [r["clients"]["client_append"]["p50_ms"] - r["service"]["p50_ms"] for r in cli]
    table.append(
        {
            "figure": "EventLogEventStore.store_event p50, sequential (SQLite)",
            "ceiling_label": f"the service's own p50 ({out['load']}, 1 connection)",
            "ceiling": ratios.sides(cli, "service"),
            "ours": {
                "p50_ms": float(
                    statistics.median(r["clients"]["store_event"]["p50_ms"] for r in cli)
                ),
                "client_append_p50_ms": float(
                    statistics.median(r["clients"]["client_append"]["p50_ms"] for r in cli)
                ),
            },
            "unit": "ms",
            "added_ms": ratios.spread(added),
            "client_append_added_ms": ratios.spread(bare),
            "goal": "≤ +0.15 ms",
            "met": statistics.median(added) <= 0.15,
        }
    )
    table.append(
        ratios.row(
            f"{plan.batch}-event batches, SQLite",
            f"raw SQLite, {plan.batch}-row transactions (FULL, WAL)",
            *ratios.compare(bat, "raw_sqlite", "sqlite", "events_per_s"),
            "≥ 0.35x",
            unit="events/s",
        )
    )
    return table
