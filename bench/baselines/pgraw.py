"""The PostgreSQL ceilings: the statements of an append, without the service, by pgbench.

`bench/baselines/sql/append.pgbench` is one single-event append as the service sends it (BEGIN; the
generation's row locked and read; the event inserted; the counters moved; COMMIT), run
with prepared statements (`-M prepared`, as asyncpg prepares them) by `pgbench`, the
load generator PostgreSQL ships. Client c appends to its own generation `pgbench-c`,
seeded here with the service's schema. Two figures come out of it:

- throughput with N clients (`-cN -j2`): transactions per second;
- latency with one client: the p50 of the per-transaction log (`-l`).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from bench.loads.payload import PROGRESS
from bench.seed import seed_long_generation

SCRIPT = Path(__file__).resolve().parent / "sql" / "append.pgbench"
TIMEOUT_S = 120


def available() -> bool:
    """Whether a `pgbench` is on the PATH."""
    return shutil.which("pgbench") is not None


def libpq_url(sqlalchemy_url: str) -> str:
    """`postgresql+asyncpg://…/db` as a libpq URI (`postgresql://…/db`)."""
    url = make_url(sqlalchemy_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def seed(url: str, clients: int) -> None:
    """One stream with one empty generation `pgbench-<c>` for every pgbench client c."""
    for client in range(clients):
        seed_long_generation(url, f"pgbench-stream-{client}", 0, token=f"pgbench-{client}")


def run(url: str, *, clients: int, seconds: float, latencies: bool = False) -> dict[str, Any]:
    """Run the append script for `seconds` with `clients` clients; tps (and p50 with `latencies`).

    `seed(url, clients)` must have run first.
    """
    with tempfile.TemporaryDirectory(prefix="eventlog-pgbench-") as tmp:
        argv = [
            "pgbench",
            "-n",  # no vacuum of pgbench's own tables (there are none)
            "-M",
            "prepared",
            "-c",
            str(clients),
            "-j",
            str(min(clients, 2)),
            "-T",
            str(max(1, round(seconds))),
            "-f",
            str(SCRIPT),
            "-D",
            f"data={PROGRESS}",
        ]
        if latencies:
            argv += ["-l", "--log-prefix", f"{tmp}/txn"]
        done = subprocess.run(  # noqa: S603 (pgbench from the PATH, our own arguments)
            [*argv, libpq_url(url)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
            cwd=tmp,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pgbench failed ({done.returncode}):\n{done.stderr[-2000:]}")
        out = _parse(done.stdout)
        if latencies:
            samples = [
                int(line.split()[2]) / 1e3
                for log in Path(tmp).glob("txn*")
                for line in log.read_text().splitlines()
            ]
            out |= _latency(samples)
    out["clients"] = clients
    return out


def _parse(stdout: str) -> dict[str, Any]:
    tps = failed = processed = None
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("tps =") and tps is None:
            tps = float(line.split()[2])
        elif line.startswith("number of transactions actually processed:"):
            processed = int(line.split(":")[1].split("/")[0])
        elif line.startswith("number of failed transactions:"):
            failed = int(line.split(":")[1].split("(")[0])
    if tps is None:
        raise RuntimeError(f"no tps in pgbench's output:\n{stdout[-2000:]}")
    return {
        "transactions_per_s": tps,
        "events_per_s": tps,
        "requests_per_s": tps,
        "transactions": processed,
        "failed": failed or 0,
    }


def _latency(samples_ms: list[float]) -> dict[str, Any]:
    if not samples_ms:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "latency_samples": 0}
    ordered = sorted(samples_ms)
    return {
        "p50_ms": float(statistics.median(ordered)),
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "latency_samples": len(ordered),
    }
