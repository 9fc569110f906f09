"""The channel's table: the append channel, and the PostgreSQL REST append in one statement,
against their ceilings measured in the same run.

Interleaved rounds (each round runs every side once, back to back), each ratio the
median of the per-round ratios with its range, as `bench/suites/append_cost.py` does. Sides:

- the service on SQLite (`FULL`, WAL) and the no-op endpoint (`bench/baselines/noop.py`: FastAPI +
  uvicorn; its WebSocket parses the same frames with the same schema, stores nothing),
  loaded through the channel by `bench/loads/channel_load.py` (one closed-loop channel per
  generation);
- raw SQLite, in-process, one-row and 100-row `FULL` commits (`bench/baselines/ceilings.py`);
- PostgreSQL: the service now (the common append as one CTE statement) and before
  (`before_tree`: the same service with the two-statement append, from git), each one
  process, loaded over REST by wrk, against `pgbench -M prepared` running the append's own
  statements (`bench/baselines/pgraw.py`).
"""

from __future__ import annotations

import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from io import BytesIO
from pathlib import Path
from typing import Any

from bench import alone, ratios, seed, servers
from bench.baselines import pgraw
from bench.loads import wrk
from bench.loads.child import measure
from bench.plan import Plan
from bench.suites import append_cost

Results = dict[str, Any]
say = append_cost.say
# The last commit whose PostgreSQL append is two statements (UPDATE … RETURNING, INSERT).
BEFORE_ONE_STATEMENT = "2ff8599"


def channel_load(port: int, tokens: list[str], *, batch: int, seconds: float) -> Results:
    """One closed-loop channel per token, `batch` events a frame (`bench/loads/channel_load.py`)."""
    spec = {"kind": "channel", "port": port, "tokens": tokens, "batch": batch}
    return measure("bench.loads.channel_load", spec | {"duration": seconds})


@contextmanager
def before_tree(commit: str) -> Iterator[Path]:
    """A directory holding the `app` package as it was at `commit` (git archive)."""
    archive = subprocess.run(  # noqa: S603 (git, on this checkout)
        ["git", "archive", "--format=tar", commit, "app"],  # noqa: S607
        cwd=servers.REPO,
        capture_output=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="bench-before-") as tree:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        yield Path(tree)


def suite(plan: Plan, workdir: Path) -> Results:
    """Every row of the channel's table, per round."""
    out: Results = {"load": wrk.tool()}
    sqlite_url = f"sqlite+aiosqlite:///{workdir}/channel.db"
    seed.migrate(sqlite_url)
    n = plan.single_concurrency
    with ExitStack() as stack:
        noop = stack.enter_context(servers.noop(workdir))
        sq = stack.enter_context(servers.service(sqlite_url, workdir, name="channel-sqlite"))
        noop16 = [f"noop-{i}" for i in range(n)]
        sq16 = append_cost.open_generations(sq.port, "ch16", n)
        sq1 = append_cost.open_generations(sq.port, "ch1", 1)
        sqb = append_cost.open_generations(sq.port, "chb", 1)

        def raw(batch: int) -> Callable[[], Results]:
            return lambda: append_cost._raw_sqlite(plan, workdir, batch)

        seconds = plan.append_seconds
        say(f"19.1. one-event frames on {n} channels: SQLite, no-op channel, raw SQLite")
        out["throughput"] = append_cost._interleave(
            plan.rounds,
            {
                "sqlite": lambda: channel_load(sq.port, sq16, batch=1, seconds=seconds),
                "noop": lambda: channel_load(noop.port, noop16, batch=1, seconds=seconds),
                "raw_sqlite_1": raw(1),
            },
        )
        say("19.2. one channel, one event a frame: p50")
        out["latency"] = append_cost._interleave(
            plan.rounds,
            {
                "sqlite": lambda: channel_load(sq.port, sq1, batch=1, seconds=plan.latency_seconds),
                "noop": lambda: channel_load(
                    noop.port, noop16[:1], batch=1, seconds=plan.latency_seconds
                ),
                "raw_sqlite_1": raw(1),
            },
        )
        say(f"19.3. {plan.batch}-event frames over one channel vs raw {plan.batch}-row commits")
        out["batch"] = append_cost._interleave(
            plan.rounds,
            {
                "sqlite": lambda: channel_load(
                    sq.port, sqb, batch=plan.batch, seconds=plan.append_seconds
                ),
                "raw_sqlite": raw(plan.batch),
            },
        )
        out["postgresql"] = servers.postgres_available() and pgraw.available()
        if out["postgresql"]:
            out |= _postgres(plan, workdir, stack, noop, noop16)
        else:
            say("PostgreSQL or pgbench is missing: the PostgreSQL rows are skipped")
    out["rows"] = rows(out, plan)
    return out


def _postgres(
    plan: Plan, workdir: Path, stack: ExitStack, noop: servers.ServerProcess, noop16: list[str]
) -> Results:
    n = plan.single_concurrency
    pg_url = stack.enter_context(servers.throwaway_postgres())
    seed.migrate(pg_url)
    pgraw.seed(pg_url, n)
    tree = stack.enter_context(before_tree(BEFORE_ONE_STATEMENT))
    now = stack.enter_context(servers.service(pg_url, workdir, name="pg-now"))
    before = stack.enter_context(servers.service(pg_url, workdir, name="pg-before", tree=tree))
    tokens = {
        s.port: append_cost.open_generations(s.port, name, n + 1)
        for name, s in (("pg-now", now), ("pg-before", before))
    }

    def rest(server: servers.ServerProcess, count: int, seconds: float) -> Callable[[], Results]:
        mine = tokens[server.port][:count] if count > 1 else tokens[server.port][n:]
        return lambda: wrk.append(server.port, mine, batch=1, seconds=seconds)

    say(f"19.4. REST one-event appends, {n} connections, PostgreSQL: now, before, pgbench")
    throughput = append_cost._interleave(
        plan.rounds,
        {
            "postgresql": rest(now, n, plan.append_seconds),
            "before": rest(before, n, plan.append_seconds),
            "pgbench": lambda: pgraw.run(pg_url, clients=n, seconds=plan.append_seconds),
        },
    )
    say("19.5. REST one-event appends, 1 connection, p50, PostgreSQL: now, before, no-op, raw")
    latency = append_cost._interleave(
        plan.rounds,
        {
            "postgresql": rest(now, 1, plan.latency_seconds),
            "before": rest(before, 1, plan.latency_seconds),
            "noop": lambda: wrk.append(
                noop.port, noop16[:1], batch=1, seconds=plan.latency_seconds
            ),
            "pgbench": lambda: pgraw.run(
                pg_url, clients=1, seconds=plan.latency_seconds, latencies=True
            ),
        },
    )
    return {"pg_throughput": throughput, "pg_latency": latency}


def rows(out: Results, plan: Plan) -> list[Results]:
    """The table's rows: figure, ceiling, ours, ratio (median and range), goal, met."""
    n = plan.single_concurrency
    thr, lat, bat = out["throughput"], out["latency"], out["batch"]
    commit_ms = [1e3 / r["raw_sqlite_1"]["commits_per_s"] for r in lat]
    floor = [r["noop"]["p50_ms"] + c for r, c in zip(lat, commit_ms, strict=True)]
    table = [
        ratios.row(
            f"one-event appends on {n} channels (SQLite FULL), events/s",
            "raw SQLite one-row FULL commits/s",
            *ratios.compare(thr, "raw_sqlite_1", "sqlite", "events_per_s"),
            "≥ 1.0x",
        ),
        ratios.row(
            "the same ÷ the no-op channel, same frames",
            "no-op WebSocket endpoint parsing the same frames",
            *ratios.compare(thr, "noop", "sqlite", "events_per_s"),
            "≥ 0.5x",
        ),
        ratios.row(
            "one channel, one event at a time, p50 (SQLite)",
            "no-op channel p50 + one raw durable commit",
            *ratios.summed_floor(lat, "sqlite", floor),
            "≤ 1.5x",
        ),
        ratios.row(
            f"{plan.batch}-event batches over a channel (SQLite), events/s",
            f"raw SQLite {plan.batch}-row transactions",
            *ratios.compare(bat, "raw_sqlite", "sqlite", "events_per_s"),
            "≥ 0.35x",
        ),
    ]
    if out["postgresql"]:
        pthr, plat = out["pg_throughput"], out["pg_latency"]
        ceiling = [r["noop"]["p50_ms"] + r["pgbench"]["p50_ms"] for r in plat]
        for who in ("postgresql", "before"):
            name = "now (one statement)" if who == "postgresql" else "before (two statements)"
            table.append(
                ratios.row(
                    f"REST one-event append, {n} connections, PostgreSQL, {name}",
                    f"pgbench -c{n} -M prepared, same statements",
                    *ratios.compare(pthr, "pgbench", who, "requests_per_s"),
                    "≥ 0.4x",
                )
            )
        for who in ("postgresql", "before"):
            name = "now (one statement)" if who == "postgresql" else "before (two statements)"
            table.append(
                ratios.row(
                    f"REST one-event append, 1 connection, p50, PostgreSQL, {name}",
                    "no-op p50 + raw transaction p50 (pgbench -c1)",
                    *ratios.summed_floor(plat, who, ceiling),
                    "≤ 1.5x",
                )
            )
    return table


def table(out: Results) -> str:
    """The rows as a Markdown table."""
    lines = ["| figure | ceiling | ratio, median (range) | goal | met |", "|---|---|---|---|---|"]
    for r in out["rows"]:
        ratio = r["ratio"]
        spread = f"**{ratio['median']:.2f}x** ({ratio['min']:.2f}..{ratio['max']:.2f})"
        met = "yes" if r["met"] else "no"
        lines.append(f"| {r['figure']} | {r['ceiling_label']} | {spread} | {r['goal']} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.suites.channel_cost [--quick] [--json PATH]`: this suite alone."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="bench.suites.channel_cost")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    out = alone.run(suite, "eventlog-channel-", alone.plan(args.quick))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    print(table(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
