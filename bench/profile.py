"""`python -m bench.profile append|resume [--postgres]`: where a hot path spends its time.

Starts the service under py-spy (as its parent, so no ptrace privilege is needed), drives
one load from the load process, and prints the frames of the service's own code and of
the layers under it by share of samples, split by thread: the event loop thread (HTTP,
FastAPI, the use case) and the others (aiosqlite's connection threads, anyio's
threadpool for sync dependencies). Raw samples go to `bench/results/profile-<path>.txt`
(collapsed stacks, for flamegraph tools).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench import seed, servers
from bench.report import RESULTS_DIR
from bench.run import load

_SHOWN = ("app/", "aiosqlite", "greenlet_spawn", "run_in_threadpool", "sqlalchemy/engine/base")


def _summary(raw: Path, top: int) -> str:
    main: collections.Counter[str] = collections.Counter()
    other: collections.Counter[str] = collections.Counter()
    main_total = other_total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames, n = stack.split(";"), int(count)
        if any("Runner.run" in f for f in frames):
            main_total += n
            for frame in set(frames):
                main[frame] += n
        else:
            other_total += n
            other[frames[-1]] += n
    lines = [f"event-loop thread: {main_total} samples; other threads: {other_total}"]
    lines += [
        f"  {n / max(1, main_total):6.1%}  {frame}"
        for frame, n in main.most_common(400)
        if any(key in frame for key in _SHOWN)
    ][:top]
    lines.append("other threads, innermost frame:")
    lines += [f"  {n / max(1, other_total):6.1%}  {frame}" for frame, n in other.most_common(8)]
    return "\n".join(lines)


def profile(path: str, seconds: float, top: int, *, postgres: bool) -> str:
    """Profile the `append` (16 clients, 1 event) or `resume` (1 client, 100k stored) path."""
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="eventlog-profile-"))
        url = (
            stack.enter_context(servers.throwaway_postgres())
            if postgres
            else f"sqlite+aiosqlite:///{tmp}/profile.db"
        )
        seed.migrate(url)
        claims = seed.seed_streams(url, "hist", 0, 500, seed.Layout()) if path == "resume" else []
        port = servers.free_port()
        raw = RESULTS_DIR / f"profile-{path}-{'postgresql' if postgres else 'sqlite'}.txt"
        env = {
            **os.environ,
            "EVENTLOG_DATABASE_URL": url,
            "EVENTLOG_LOG_LEVEL": "warning",
            "EVENTLOG_MIGRATE_ON_START": "false",
        }
        argv = [py_spy, "record", "-r", "200", "-f", "raw", "-o", str(raw), "--"]
        argv += [sys.executable, "-m", "app", "serve", "--port", str(port)]
        with (Path(tmp) / "py-spy.log").open("wb") as log:
            spy = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        try:
            time.sleep(4)  # py-spy starts the service; /healthz would be sampled too
            if path == "append":
                spec = {
                    "kind": "append",
                    "ports": [port],
                    "concurrency": 16,
                    "batch": 1,
                    "duration": seconds,
                    "warmup": 0.5,
                    "tag": "profile",
                }
            else:
                spec = {
                    "kind": "resume",
                    "port": port,
                    "claims": claims,
                    "duration": seconds,
                    "max_requests": 1_000_000,
                }
            result = load(spec)
        finally:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        return f"{path}: {result}\n{_summary(raw, top)}"


def main() -> int:
    """`python -m bench.profile {append,resume} [--seconds S] [--top N]`."""
    parser = argparse.ArgumentParser(prog="bench.profile", description=__doc__)
    parser.add_argument("path", choices=("append", "resume"))
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL database")
    args = parser.parse_args()
    print(profile(args.path, args.seconds, args.top, postgres=args.postgres))
    return 0


if __name__ == "__main__":
    sys.exit(main())
