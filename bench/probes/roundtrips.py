"""`python -m bench.probes.roundtrips`: the SQL statements and round trips of one append.

Runs the real service process on each database and sends single-event appends to it
one at a time, after a warm-up (so caches are warm and the counts are the steady state):

- SQLite: the service runs under `bench/probes/traced_serve.py`, which traces every statement
  SQLite executes (BEGIN and COMMIT included) with the thread that ran it;
- PostgreSQL: the service connects through `bench/probes/pg_proxy.py`, a counting proxy that sees
  every protocol message and counts the round trips.

Then it sends 16 concurrent connections' worth of appends for a second (wrk when it is
installed) and reports how many appends share a transaction (SQLite's group commit) and
how many connections the PostgreSQL pool opens. Prints a report; used for
`docs/measurements/append-path.md`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bench import seed, servers
from bench.loads import wrk
from bench.loads.http_client import Connection
from bench.loads.payload import append_body
from bench.probes import pg_proxy
from bench.suites.append_cost import open_generations

WARMUP = 30


async def _append_sequentially(port: int, token: str, n: int) -> None:
    conn = Connection("127.0.0.1", port)
    body = append_body(1)
    try:
        for _ in range(n):
            status, payload = await conn.request("POST", f"/v1/generations/{token}/events", body)
            if status != 201:
                raise RuntimeError(f"append: {status} {payload[:200]!r}")
    finally:
        await conn.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def sqlite(appends: int) -> str:
    """Statements per append on SQLite, alone and under 16 connections."""
    out = []
    with tempfile.TemporaryDirectory(prefix="eventlog-roundtrips-") as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/trace.db"
        seed.migrate(url)
        trace = Path(tmp) / "sql.trace"
        trace.touch()
        env = {
            "EVENTLOG_DATABASE_URL": url,
            "EVENTLOG_LOG_LEVEL": "warning",
            "EVENTLOG_MIGRATE_ON_START": "false",
            "BENCH_SQL_TRACE": str(trace),
        }
        argv = [sys.executable, "-m", "bench.probes.traced_serve"]
        with servers.started("traced", argv, env, Path(tmp)) as server:
            tokens = open_generations(server.port, "rt", 17)
            asyncio.run(_append_sequentially(server.port, tokens[0], WARMUP))
            mark = len(_lines(trace))
            asyncio.run(_append_sequentially(server.port, tokens[0], appends))
            window = _lines(trace)[mark:]
            out.append(f"SQLite, {appends} sequential single-event appends:")
            out.append(f"  statements per append: {len(window) / appends:.2f}")
            threads = collections.Counter(
                line.split("\t")[0].rstrip("_0123456789") for line in window
            )
            out.append(f"  by thread: {dict(threads)}")
            last_begin = max(i for i, line in enumerate(window) if "\tBEGIN" in line)
            out.append("  the last append's statements:")
            out += [f"    {line}" for line in window[last_begin:]]
            if wrk.tool() == "wrk":
                mark = len(_lines(trace))
                result = wrk.append(server.port, tokens[1:], batch=1, seconds=2)
                window = _lines(trace)[mark:]
                begins = sum("\tBEGIN" in line for line in window)
                out.append(
                    f"SQLite, 16 connections for 2 s: {result['requests']} appends in {begins} "
                    f"transactions ({result['requests'] / max(1, begins):.1f} appends per "
                    f"commit), {len(window) / max(1, result['requests']):.2f} statements per append"
                )
    return "\n".join(out)


def postgresql(appends: int) -> str:
    """Statements, protocol messages and round trips per append on PostgreSQL."""
    out = []
    with servers.throwaway_postgres() as url, pg_proxy.CountingProxy(("127.0.0.1", 5432)) as proxy:
        seed.migrate(url)
        proxied = url.replace("@127.0.0.1:5432/", f"@127.0.0.1:{proxy.port}/")
        with (
            tempfile.TemporaryDirectory(prefix="eventlog-roundtrips-") as tmp,
            servers.service(proxied, Path(tmp), name="pg-proxied") as server,
        ):
            tokens = open_generations(server.port, "rt", 17)
            asyncio.run(_append_sequentially(server.port, tokens[0], WARMUP))
            proxy.tally.mark()
            asyncio.run(_append_sequentially(server.port, tokens[0], appends))
            messages, trips, statements = proxy.tally.snapshot()
            out.append(f"PostgreSQL, {appends} sequential single-event appends:")
            out.append(f"  round trips per append: {trips / appends:.2f}")
            out.append(
                "  protocol messages per append: "
                + ", ".join(f"{k} {v / appends:.2f}" for k, v in sorted(messages.items()))
            )
            out.append(f"  statements per append: {len(statements) / appends:.2f}")
            per = len(statements) // appends
            out.append("  the last append's statements:")
            out += [f"    {s[:160]}" for s in statements[-per:]]
            if wrk.tool() == "wrk":
                proxy.tally.mark()
                result = wrk.append(server.port, tokens[1:], batch=1, seconds=2)
                messages, trips, statements = proxy.tally.snapshot()
                n = max(1, result["requests"])
                out.append(
                    f"PostgreSQL, 16 connections for 2 s: {result['requests']} appends, "
                    f"{trips / n:.2f} round trips and {len(statements) / n:.2f} statements "
                    f"per append; {messages.get('Parse', 0)} Parse messages and "
                    f"{messages.get('Startup (new connection)', 0)} new connections"
                )
    return "\n".join(out)


def _thread_cpu(pid: int) -> dict[int, tuple[float, float]]:
    import psutil  # type: ignore[import-untyped]

    return {t.id: (t.user_time, t.system_time) for t in psutil.Process(pid).threads()}


def cpu_per_request(port: int, pid: int, tokens: list[str], seconds: float = 3) -> str:
    """CPU time the server process spends per request under the 16-connection load, by
    thread: the main (event-loop) thread, and the rest (SQLite: the writer's thread)."""
    before = _thread_cpu(pid)
    result = wrk.append(port, tokens, batch=1, seconds=seconds)
    after = _thread_cpu(pid)
    n = max(1, result["requests"])

    def spent(main: bool, part: int) -> float:
        return sum(
            v[part] - before.get(t, (0.0, 0.0))[part]
            for t, v in after.items()
            if (t == pid) == main
        )

    loop_user, loop_sys = spent(True, 0), spent(True, 1)
    rest_user, rest_sys = spent(False, 0), spent(False, 1)
    total = loop_user + loop_sys + rest_user + rest_sys
    ms = 1e3 / n
    return (
        f"{result['requests_per_s']:,.0f} req/s (p50 {result['p50_ms']:.2f} ms); server CPU "
        f"per request {total * ms:.3f} ms = event-loop thread {loop_user * ms:.3f} user + "
        f"{loop_sys * ms:.3f} sys, other threads {rest_user * ms:.3f} user + "
        f"{rest_sys * ms:.3f} sys; the process used {total / seconds:.0%} of one core"
    )


def cpu() -> str:
    """Server CPU per request for the no-op and the service on both databases."""
    out = ["CPU per request under 16 connections (wrk, 3 s each):"]
    with tempfile.TemporaryDirectory(prefix="eventlog-roundtrips-") as tmp, ExitStack() as stack:
        url = f"sqlite+aiosqlite:///{tmp}/cpu.db"
        seed.migrate(url)
        noop = stack.enter_context(servers.noop(Path(tmp)))
        sq = stack.enter_context(servers.service(url, Path(tmp), name="cpu-sqlite"))
        targets = [
            ("no-op", noop, [f"noop-{i}" for i in range(16)]),
            ("SQLite", sq, open_generations(sq.port, "cpu", 16)),
        ]
        if servers.postgres_available():
            pg_url = stack.enter_context(servers.throwaway_postgres())
            seed.migrate(pg_url)
            pg = stack.enter_context(servers.service(pg_url, Path(tmp), name="cpu-pg"))
            targets.append(("PostgreSQL", pg, open_generations(pg.port, "cpu", 16)))
        for _, server, tokens in targets:
            wrk.append(server.port, tokens, batch=1, seconds=1)  # warm up
        for name, server, tokens in targets:
            out.append(f"  {name}: {cpu_per_request(server.port, server.pid, tokens)}")
    return "\n".join(out)


def main() -> int:
    """`python -m bench.probes.roundtrips [--appends N] [--sqlite-only | --postgres-only]`."""
    parser = argparse.ArgumentParser(prog="bench.probes.roundtrips", description=__doc__)
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--sqlite-only", action="store_true")
    parser.add_argument("--postgres-only", action="store_true")
    parser.add_argument("--cpu-only", action="store_true")
    args = parser.parse_args()
    if wrk.tool() == "wrk":
        print(cpu())
    if args.cpu_only:
        return 0
    if not args.postgres_only:
        print(sqlite(args.appends))
    if not args.sqlite_only and servers.postgres_available():
        print(postgresql(args.appends))
    return 0


if __name__ == "__main__":
    sys.exit(main())
