"""Live reads: append→reader latency, and the readers one process holds.

- Latency: one writer appends ~200-byte events at 200/s (open loop); one live reader
  follows the stream on the same process, or on another process on the same database
  (PostgreSQL: LISTEN/NOTIFY; SQLite: the poll of the file). p50/p99 from the moment an
  append is sent to the moment the reader has parsed it, both timed in one load process.
- Readers one process holds: 1,000 readers on one generation, and 1,000 generations with
  one reader each, on PostgreSQL. Two service processes share the database: X holds the
  readers, Y none. Eight writers append (one event per request, closed loop) in
  alternating windows: to the followed generations through X, then to as many unfollowed
  ones through Y. Each round's ratio compares the two; the figure is the median ratio,
  with its range. Every reader must then have counted every event of its generation.

Everything runs in `bench.loads.live_load` processes (writers and readers apart), on 127.0.0.1,
each server and database made for the run and removed after it.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from app.storage.migrate import upgrade
from bench import servers
from bench.loads.child import LOAD_TIMEOUT_S, measure
from bench.plan import Plan

Results = dict[str, Any]
GOALS = {"same_p99_ms": 50.0, "replicas_p99_ms": 500.0, "ratio": 0.8, "readers": 1_000}


@dataclass(frozen=True, slots=True)
class Sizes:
    """How long and how big, per plan."""

    latency_seconds: float
    rate: float  # appends/s of the latency runs
    readers: int
    window_seconds: float
    rounds: int
    writers: int


SIZES = {
    "full": Sizes(
        latency_seconds=6.0, rate=200, readers=1_000, window_seconds=3.0, rounds=3, writers=8
    ),
    "quick": Sizes(
        latency_seconds=1.5, rate=200, readers=100, window_seconds=1.0, rounds=1, writers=8
    ),
}


def say(message: str) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load(spec: dict[str, Any]) -> Results:
    """Run one `bench.loads.live_load` spec to its end; its JSON result."""
    return measure("bench.loads.live_load", spec)


def suite(plan: Plan, workdir: Path) -> Results:
    """Every live measurement of the plan."""
    sizes = SIZES[plan.name]
    out: Results = {"sizes": _fields(sizes)}
    out["sqlite"] = _sqlite_latency(sizes, workdir)
    if not servers.postgres_available():
        say("PostgreSQL (BENCH_POSTGRES_DSN) is not answering: live PostgreSQL rows skipped")
        out["postgresql"] = None
        return out
    pg: Results = {}
    with servers.throwaway_postgres() as url:
        upgrade(url)
        with ExitStack() as stack:
            a = stack.enter_context(servers.service(url, workdir, name="live-a"))
            b = stack.enter_context(servers.service(url, workdir, name="live-b"))
            say(f"live: append→reader latency at {sizes.rate:.0f} appends/s, PostgreSQL")
            pg["latency_same"] = _latency(sizes, a.port, a.port, "pg-same")
            pg["latency_replicas"] = _latency(sizes, a.port, b.port, "pg-replicas")
    for name, followed in (
        ("one_generation", ["crowd"]),
        ("many_generations", [f"single-{i}" for i in range(sizes.readers)]),
    ):
        say(f"live: {sizes.readers:,} readers, {name.replace('_', ' ')}, PostgreSQL")
        with servers.throwaway_postgres() as url:
            upgrade(url)
            pg[name] = _capacity(sizes, url, workdir, followed)
    out["postgresql"] = pg
    return out


def _fields(sizes: Sizes) -> dict[str, Any]:
    return {name: getattr(sizes, name) for name in sizes.__slots__}


def _sqlite_latency(sizes: Sizes, workdir: Path) -> Results:
    url = f"sqlite+aiosqlite:///{workdir}/live.db"
    upgrade(url)
    say(f"live: append→reader latency at {sizes.rate:.0f} appends/s, SQLite")
    with ExitStack() as stack:
        a = stack.enter_context(servers.service(url, workdir, name="live-sqlite-a"))
        b = stack.enter_context(servers.service(url, workdir, name="live-sqlite-b"))
        return {
            "latency_same": _latency(sizes, a.port, a.port, "sqlite-same"),
            "latency_replicas": _latency(sizes, a.port, b.port, "sqlite-replicas"),
        }


def _latency(sizes: Sizes, write: int, read: int, stream: str) -> Results:
    spec = {
        "kind": "latency",
        "write": write,
        "read": read,
        "stream_id": f"latency-{stream}",
        "rate": sizes.rate,
        "duration": sizes.latency_seconds,
    }
    return load(spec)


def _capacity(sizes: Sizes, url: str, workdir: Path, followed: list[str]) -> Results:
    """Readers on `followed` in X; alternating writer windows through X and through Y."""
    unfollowed = [f"nobody-{i}" for i in range(len(followed))]
    with ExitStack() as stack:
        x = stack.enter_context(servers.service(url, workdir, name="live-x"))
        y = stack.enter_context(servers.service(url, workdir, name="live-y"))
        mine = load({"kind": "open", "port": x.port, "streams": followed})["tokens"]
        theirs = load({"kind": "open", "port": y.port, "streams": unfollowed})["tokens"]
        rss_before = x.rss()
        readers = _Readers(x.port, followed, sizes.readers)
        stack.callback(readers.kill)
        rss_connected = x.rss()
        windows = []
        for _ in range(sizes.rounds):  # X's window last: the readers' drain is timed after it
            windows += [
                {"port": y.port, "tokens": theirs, "duration": sizes.window_seconds},
                {"port": x.port, "tokens": mine, "duration": sizes.window_seconds},
            ]
        with servers.RssSampler(x.pid, interval=0.01) as rss:
            writers = load({"kind": "writers", "concurrency": sizes.writers, "windows": windows})
            token_of = dict(zip(mine, followed, strict=True))
            expect = {token_of[t]: n for t, n in writers["acked"].items() if t in token_of}
            delivered = readers.finish(expect)
    without, with_readers = writers["windows"][0::2], writers["windows"][1::2]
    ratios = [
        w["appends_per_s"] / o["appends_per_s"] for w, o in zip(with_readers, without, strict=True)
    ]
    return {
        "readers": sizes.readers,
        "generations": len(followed),
        "with_readers": with_readers,
        "without_readers": without,
        "ratio": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
        "delivered": delivered,
        "events_per_reader": sum(expect.values()) / len(followed),  # readers spread evenly
        "rss_mib": {
            "before": rss_before / 2**20,
            "connected": rss_connected / 2**20,
            "peak": rss.peak / 2**20,
        },
    }


class _Readers:
    """A `readers` load process: started, `ready`, then told what to expect."""

    def __init__(self, port: int, streams: list[str], count: int) -> None:
        spec = {"kind": "readers", "port": port, "streams": streams, "count": count}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.loads.live_load"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=servers.REPO,
        )
        self._send(spec)
        ready = self._stdout().readline().decode().strip()
        if ready != "ready":
            raise RuntimeError(f"readers did not connect: {ready!r} {self._errors()}")

    def _stdout(self) -> IO[bytes]:
        assert self._process.stdout is not None
        return self._process.stdout

    def _send(self, doc: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(doc).encode() + b"\n")
        self._process.stdin.flush()

    def _errors(self) -> str:
        self.kill()
        assert self._process.stderr is not None
        return self._process.stderr.read().decode()[-3000:]

    def finish(self, expect: dict[str, int]) -> Results:
        """Tell the readers what each stream holds; what they received."""
        self._send({"expect": expect})
        line = self._stdout().readline()
        if not line:
            raise RuntimeError(f"readers failed: {self._errors()}")
        self._process.wait(LOAD_TIMEOUT_S)
        result: Results = json.loads(line)
        return result

    def kill(self) -> None:
        """Stop the process if it still runs."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


# -- the report -------------------------------------------------------------------------


def targets(live: Results | None) -> Results:
    """The live goals of the run (PostgreSQL rows; none when it was not there)."""
    pg = None if live is None else live.get("postgresql")
    if pg is None:
        return {}
    same = pg["latency_same"]["latency"]["p99_ms"]
    replicas = pg["latency_replicas"]["latency"]["p99_ms"]
    out: Results = {
        "live_latency_same_process_p99_ms": {
            "value": same,
            "goal": f"<= {GOALS['same_p99_ms']:.0f} ms",
            "met": same <= GOALS["same_p99_ms"],
        },
        "live_latency_replicas_p99_ms": {
            "value": replicas,
            "goal": f"<= {GOALS['replicas_p99_ms']:.0f} ms",
            "met": replicas <= GOALS["replicas_p99_ms"],
        },
    }
    for name in ("one_generation", "many_generations"):
        doc = pg[name]
        ratio = doc["ratio"]["median"]
        held = doc["delivered"]["complete"] == doc["readers"] >= GOALS["readers"]
        out[f"live_readers_{name}_append_ratio"] = {
            "value": ratio,
            "goal": f">= {GOALS['ratio']:.0%} of the rate without readers, "
            f"{GOALS['readers']:,} readers all served",
            "met": ratio >= GOALS["ratio"] and held,
        }
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _lat(doc: Results) -> str:
    lat = doc["latency"]
    return f"{lat['p50_ms']:.1f} / {lat['p99_ms']:.1f} ms"


def table(live: Results | None) -> str:
    """The live rows as Markdown (empty when the suite did not run)."""
    if live is None:
        return ""
    goals = targets(live)
    lines = [
        "### Live reads",
        "",
        "| measurement | result | compared with (same run) | ratio | goal | |",
        "|---|---|---|---|---|---|",
    ]
    rate = live["sizes"]["rate"]
    pg, sq = live.get("postgresql"), live["sqlite"]
    if pg is not None:
        for key, where, goal in (
            ("latency_same", "same process", "live_latency_same_process_p99_ms"),
            ("latency_replicas", "across two processes", "live_latency_replicas_p99_ms"),
        ):
            doc = pg[key]
            lines.append(
                f"| append→reader p50/p99, {where}, PostgreSQL, {rate:.0f} appends/s "
                f"| {_lat(doc)} | the append itself: {doc['append']['p50_ms']:.1f} / "
                f"{doc['append']['p99_ms']:.1f} ms; {doc['received']}/{doc['appends']} received "
                f"| | p99 {goals[goal]['goal']} | {_met(goals[goal]['met'])} |"
            )
    for key, where in (
        ("latency_same", "same process"),
        ("latency_replicas", "across two processes (poll 100 ms)"),
    ):
        doc = sq[key]
        lines.append(
            f"| append→reader p50/p99, {where}, SQLite, {rate:.0f} appends/s | {_lat(doc)} "
            f"| the append itself: {doc['append']['p50_ms']:.1f} / "
            f"{doc['append']['p99_ms']:.1f} ms; {doc['received']}/{doc['appends']} received "
            "| | | |"
        )
    if pg is not None:
        for key, what in (
            ("one_generation", "on one generation"),
            ("many_generations", "on as many generations, one each"),
        ):
            lines += _capacity_rows(pg[key], what, goals[f"live_readers_{key}_append_ratio"])
    return "\n".join(lines)


def _capacity_rows(doc: Results, what: str, goal: Results) -> list[str]:
    def rate(windows: list[Results]) -> str:
        rates = [w["appends_per_s"] for w in windows]
        p99 = statistics.median(w["p99_ms"] for w in windows)
        return f"{statistics.median(rates):,.0f} appends/s (p99 {p99:.0f} ms)"

    ratio = doc["ratio"]
    got = doc["delivered"]
    rss = doc["rss_mib"]
    return [
        f"| {doc['readers']:,} readers {what}, PostgreSQL: appends to the followed "
        f"generation{'s' if doc['generations'] > 1 else ''} | {rate(doc['with_readers'])} "
        f"| the same appends through a process with no readers: {rate(doc['without_readers'])} "
        f"| {ratio['median']:.2f}x ({ratio['min']:.2f}-{ratio['max']:.2f}) | {goal['goal']} "
        f"| {_met(goal['met'])} |",
        f"|    delivered | {got['complete']:,}/{got['readers']:,} readers got all "
        f"{doc['events_per_reader']:,.0f} events of theirs (all there "
        f"{got['drain_s']:.1f} s after the writers ended); {got['closed_early']} connections "
        "closed early "
        f"| server RSS {rss['before']:.0f} MiB → {rss['connected']:.0f} connected → "
        f"{rss['peak']:.0f} peak | | | |",
    ]


def main() -> int:
    """`python -m bench.suites.live [--quick]`: this suite alone, printed and written to
    `bench/results/live-<plan>.{json,md}` (`make bench` runs it with the rest)."""
    import argparse
    import os
    import tempfile

    from bench.plan import FULL, QUICK

    parser = argparse.ArgumentParser(prog="bench.suites.live", description=main.__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument(
        "--crowd",
        action="store_true",
        help="only 1,000 readers of one generation on PostgreSQL: "
        "printed and written to bench/results/live-crowd.json",
    )
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    if args.crowd:
        return crowd(plan)
    results_dir = Path(__file__).resolve().parents[1] / "results"
    with tempfile.TemporaryDirectory(prefix="eventlog-bench-live-") as workdir:
        began = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        load_before = os.getloadavg()
        results = {"plan": plan.name, "started_at": began, "live": suite(plan, Path(workdir))}
    results["machine"] = {
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    results["targets"] = targets(results["live"])
    text = table(results["live"]) + (
        f"\n\nPlan `{plan.name}`, started {began}, {os.cpu_count()} CPUs, load average "
        f"{load_before[0]:.2f} before and {os.getloadavg()[0]:.2f} after.\n"
    )
    stem = results_dir / f"live-{plan.name}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    stem.with_suffix(".md").write_text(text)
    print(text + f"\nWrote {stem}.json and {stem}.md")
    return 0


def crowd(plan: Plan) -> int:
    """1,000 readers of one generation, alone (about a minute): the ratio of appends with
    them to appends without, written to `bench/results/live-crowd.json`."""
    import os
    import tempfile

    sizes = SIZES[plan.name]
    keep = os.environ.get("BENCH_KEEP_LOGS")
    with tempfile.TemporaryDirectory(prefix="eventlog-bench-crowd-") as tmp:
        workdir = keep or tmp
        began = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        load_before = os.getloadavg()
        with servers.throwaway_postgres() as url:
            upgrade(url)
            result = _capacity(sizes, url, Path(workdir), ["crowd"])
    doc = {
        "started_at": began,
        "source": os.environ.get("BENCH_LABEL", "this tree"),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "one_generation": result,
    }
    path = Path(__file__).resolve().parents[1] / "results" / "live-crowd.json"
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    path.write_text(json.dumps({"runs": [*runs, doc]}, indent=2) + "\n")
    ratio = result["ratio"]
    print(
        f"{doc['source']}: {sizes.readers} readers of one generation: ratio "
        f"{ratio['median']:.2f}x ({ratio['min']:.2f}-{ratio['max']:.2f}); delivered "
        f"{result['delivered']}; load {load_before[0]:.2f} -> {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
