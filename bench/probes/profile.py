"""`python -m bench.probes.profile append|channel|resume [--postgres]`: where a hot path
spends its time.

Starts the real service under py-spy (as its parent, so no ptrace privilege is needed),
drives it (appends: wrk, 16 connections each on its own generation, or the Python load
process when wrk is missing; resume: the Python load process, one client), and prints:

- the samples per thread: the event-loop thread (HTTP, FastAPI, the use case; on
  PostgreSQL also the driver) and the others (SQLite: the writer's thread);
- every sample attributed to its innermost *layer* (uvicorn, the middlewares, FastAPI's
  request handling, pydantic, JSON, the app's own code, SQLAlchemy's compile and execute,
  the drivers, the greenlet bridge, asyncio, logging, metrics …): the exclusive cost of
  each layer, per thread;
- the frames with the largest inclusive share of the event-loop thread;
- the hottest leaf frames (self time).

With `--gil`, only samples of the thread holding the GIL are kept: on 2 cores a Python
process is bounded by the GIL, so that is the budget every layer competes for.
Raw samples go to `bench/results/profile-<path>-<db>.txt` (collapsed stacks: feed them
to flamegraph.pl or speedscope for the picture).
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
from bench.loads import wrk
from bench.loads.child import measure
from bench.report import RESULTS_DIR
from bench.suites.append_cost import open_generations
from bench.suites.channel_cost import channel_load

RATE = 250  # samples per second

# (layer, substrings of a frame that place it there). Checked in order; a sample goes to
# the innermost frame that matches any layer.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("json encode/decode", ("json/encoder.py", "json/decoder.py", "json/__init__.py")),
    ("logging", ("logging/__init__.py", "app/logs.py")),
    ("prometheus metrics", ("prometheus_client/", "app/api/metrics.py")),
    ("middleware: body limit", ("app/api/frontdoor/limits.py",)),
    ("auth / dependencies", ("app/api/deps.py", "app/api/auth.py", "fastapi/security")),
    ("fastapi: response model (serialize_response)", ("serialize_response", "fastapi/encoders.py")),
    (
        "fastapi: dependencies + request body",
        (
            "solve_dependencies",
            "request_body_to_args",
            "_extract_form_body",
            "request_params_to_args",
        ),
    ),
    ("pydantic (validation / dump)", ("pydantic/", "pydantic_core/")),
    ("greenlet bridge (await_only / greenlet_spawn)", ("_concurrency_py3k.py",)),
    ("asyncpg driver", ("asyncpg/",)),
    ("sqlalchemy asyncpg adapter", ("dialects/postgresql/asyncpg.py",)),
    ("aiosqlite", ("aiosqlite/",)),
    (
        "sqlalchemy: compile + cache key",
        (
            "sql/compiler.py",
            "sql/cache_key.py",
            "sql/elements.py",
            "sql/selectable.py",
            "sql/dml.py",
            "sql/visitors.py",
            "sql/base.py",
            "sql/traversals.py",
            "sql/annotation.py",
            "sql/crud.py",
            "sql/coercions.py",
            "sql/schema.py",
        ),
    ),
    (
        "sqlalchemy: types (bind/result processors)",
        ("sql/sqltypes.py", "sql/type_api.py", "app/storage/schema.py", "dialects/sqlite/base.py"),
    ),
    (
        "sqlalchemy: DBAPI call (driver C code, fsync)",
        (
            "do_execute (",
            "do_executemany (",
            "do_commit (",
            "do_begin (",
            "do_rollback (",
            "exec_driver_sql (",
            "_on_begin (",
        ),
    ),
    (
        "sqlalchemy: engine (execute, result, pool)",
        (
            "sqlalchemy/engine/",
            "sqlalchemy/pool/",
            "sqlalchemy/ext/asyncio/",
            "sqlalchemy/event/",
            "sqlalchemy/util/",
        ),
    ),
    ("app: storage", ("app/storage/",)),
    ("app: domain + service", ("app/domain/", "app/service/")),
    ("app: api handlers", ("app/api/",)),
    ("fastapi routing", ("fastapi/",)),
    ("starlette", ("starlette/",)),
    ("uvicorn (httptools protocol)", ("uvicorn/",)),
    ("anyio / threads", ("anyio/", "concurrent/futures", "threading.py")),
    ("asyncio", ("asyncio/", "uvloop")),
)


# Inclusive costs worth knowing by name: (label, a substring of the frame).
KNOWN: tuple[tuple[str, str], ...] = (
    ("route matching (APIRouter/_IncludedRouter.matches)", "matches (fastapi/routing.py"),
    ("access log call (Logger.info; off below INFO)", "Logger.info"),
    ("query params parsed for dependencies", "HTTPConnection.query_params"),
    ("prometheus labels/observe/inc", "prometheus_client/"),
    ("BodyLimitMiddleware (buffer + wait_for)", "BodyLimitMiddleware._read"),
    ("dependencies (solve_dependencies)", "solve_dependencies"),
    ("request body validation (request_body_to_args)", "request_body_to_args"),
    ("response model (serialize_response)", "serialize_response"),
    ("the endpoint function (append_events)", "append_events (app/api/routes/writer.py"),
    ("EventLogService.append", "EventLogService.append"),
    ("Store.append (the write, loop side)", "Store.append"),
    ("writer thread: the group's transaction", "_commit_in_thread"),
    ("events.append (SQLAlchemy statements of an append)", "append (app/storage/events.py"),
    ("  the one-statement tail append (_append_at_tail)", "_append_at_tail (app/storage/events.py"),
    ("  generations.get (SELECT … JOIN … FOR UPDATE)", "get (app/storage/generations.py"),
    ("  _advance (UPDATE generations)", "_advance (app/storage/events.py"),
    ("  statement cache key (_generate_cache_key)", "_generate_cache_key"),
    ("  compile cache lookup (_compile_w_cache)", "_compile_w_cache"),
    ("BEGIN (engine begin / _on_begin)", "_on_begin"),
    ("COMMIT (do_commit)", "do_commit"),
    ("asyncpg BEGIN (_start_transaction)", "_start_transaction"),
    ("pool checkout (_ConnectionFairy._checkout)", "_checkout"),
    ("pool_pre_ping (do_ping)", "do_ping"),
    ("greenlet bridge (greenlet_spawn)", "greenlet_spawn"),
    ("asyncpg prepare+execute (_prepare_and_execute)", "_prepare_and_execute"),
    ("asyncpg bind+execute of a prepared statement", "__bind_execute"),
    ("uvicorn response write (RequestResponseCycle.send)", "RequestResponseCycle.send"),
    ("uvicorn request parsing (data_received)", "data_received"),
)


def _layer(frame: str) -> str | None:
    for name, keys in LAYERS:
        if any(key in frame for key in keys):
            return name
    return None


def _tid(frames: list[str]) -> str:
    """The thread id of a stack (py-spy `--threads` puts `thread (<id>)…` at its root)."""
    root = frames[0]
    return root.split(")")[0] if root.startswith("thread (") else ""


def _is_startup(frames: list[str]) -> bool:
    return any("importlib._bootstrap" in f for f in frames)


def summary(raw: Path, top: int, requests: int = 0) -> str:
    """The report of one raw py-spy file (collapsed stacks, with thread roots).

    With `requests` (how many the server answered while sampled), each layer's cost is
    also given in microseconds per request (samples / rate / requests).
    """
    samples = []
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples.append((stack.split(";"), int(count)))
    # The event loop's thread: where asyncio's runner is. Code running in a greenlet (the
    # SQLAlchemy bridge to asyncpg) has its own stack root but the same thread id.
    loop_tid = collections.Counter(
        _tid(frames) for frames, _ in samples if any("Runner.run" in f for f in frames)
    ).most_common(1)[0][0]
    layers: dict[str, collections.Counter[str]] = {
        "loop": collections.Counter(),
        "other": collections.Counter(),
    }
    inclusive: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    totals = {"loop": 0, "other": 0}
    startup = 0
    for frames, n in samples:
        if _is_startup(frames):
            startup += n
            continue
        thread = "loop" if _tid(frames) == loop_tid else "other"
        totals[thread] += n
        innermost = next((lay for f in reversed(frames) if (lay := _layer(f))), "other")
        layers[thread][innermost] += n
        leaves[frames[-1]] += n
        if thread == "loop":
            for frame in set(frames[1:]):
                inclusive[frame] += n
    everything = max(1, sum(totals.values()))
    lines = [
        f"samples: event-loop thread {totals['loop']} ({totals['loop'] / everything:.0%}), "
        f"other threads {totals['other']} ({totals['other'] / everything:.0%}); "
        f"{startup} more while importing at startup (left out)"
    ]
    for thread, label in (("loop", "event-loop thread"), ("other", "other threads")):
        if not totals[thread]:
            continue
        lines.append(
            f"{label}, by innermost layer (share of that thread; of all samples"
            + ("; per request" if requests else "")
            + "):"
        )
        lines += [
            f"  {n / totals[thread]:6.1%} {n / everything:6.1%}"
            + (f" {n / RATE / requests * 1e6:6.0f} us/req" if requests else "")
            + f"  {name}"
            for name, n in layers[thread].most_common()
        ]
    if requests:
        lines.append("what some known costs take, inclusive (all threads; per request):")
        for label, key in KNOWN:
            n = sum(
                c
                for frames, c in samples
                if not _is_startup(frames) and any(key in f for f in frames)
            )
            lines.append(
                f"  {n / everything:6.1%} {n / RATE / requests * 1e6:6.0f} us/req  {label}"
            )
    lines.append("event-loop thread, frames by inclusive share (app, FastAPI, SQLAlchemy):")
    keys = ("app/", "fastapi/", "sqlalchemy/", "asyncpg/", "starlette/", "pydantic")
    shown = [(f, n) for f, n in inclusive.most_common(600) if any(k in f for k in keys)]
    lines += [f"  {n / max(1, totals['loop']):6.1%}  {f}" for f, n in shown[:top]]
    lines.append("hottest leaf frames (self time, share of all samples):")
    lines += [f"  {n / everything:6.1%}  {f}" for f, n in leaves.most_common(top // 2)]
    return "\n".join(lines)


def profile(
    path: str,
    seconds: float,
    top: int,
    *,
    postgres: bool,
    gil: bool,
    connections: int,
    batch: int = 1,
) -> str:
    """Profile the `append` (N connections, 1 event), `channel` (N append channels) or
    `resume` (1 client) path."""
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
        db = "postgresql" if postgres else "sqlite"
        shape = f"-batch{batch}" if batch > 1 else ""
        raw = RESULTS_DIR / f"profile-{path}{shape}-{db}{'-gil' if gil else ''}.txt"
        env = {
            **os.environ,
            "EVENTLOG_DATABASE_URL": url,
            "EVENTLOG_LOG_LEVEL": "warning",
            "EVENTLOG_MIGRATE_ON_START": "false",
        }
        argv = [py_spy, "record", "-r", str(RATE), "-f", "raw", "--threads", "-o", str(raw)]
        argv += ["--gil"] if gil else []
        module = ["bench.baselines.noop"] if path == "noop" else ["app", "serve"]
        argv += ["--", sys.executable, "-m", *module, "--port", str(port)]
        with (Path(tmp) / "py-spy.log").open("wb") as log:
            spy = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        try:
            _wait_port(port)
            if path == "channel":  # the append channel: N WebSockets, one frame in flight each
                tokens = open_generations(port, "profile", connections)
                warm = channel_load(port, tokens, batch=batch, seconds=1)
                result = channel_load(port, tokens, batch=batch, seconds=seconds)
                answered = int(warm["frames"] + result["frames"]) + connections
            elif path in ("append", "noop"):
                tokens = (
                    [f"noop-{i}" for i in range(connections)]
                    if path == "noop"
                    else open_generations(port, "profile", connections)
                )
                warm = wrk.append(port, tokens, batch=batch, seconds=1)  # sampled too
                result = wrk.append(port, tokens, batch=batch, seconds=seconds)
                answered = warm["requests"] + result["requests"] + connections
            else:
                spec = {
                    "kind": "resume",
                    "port": port,
                    "claims": claims,
                    "duration": seconds,
                    "max_requests": 1_000_000,
                }
                result = measure("bench.loads.load", spec)
                answered = 0
        finally:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        brief = {k: v for k, v in result.items() if not isinstance(v, list | dict)}
        return (
            f"{path} on {db}: {brief}; {answered} requests answered while sampled\n"
            f"raw samples: {raw}\n{summary(raw, top, answered)}"
        )


def _wait_port(port: int) -> None:
    import urllib.request

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the service under py-spy did not answer /healthz")


def main() -> int:
    """`python -m bench.probes.profile {append,resume} [--postgres] [--gil] [--seconds S]`."""
    parser = argparse.ArgumentParser(prog="bench.probes.profile", description=__doc__)
    parser.add_argument("path", choices=("append", "channel", "noop", "resume"))
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1, help="events per append")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL database")
    parser.add_argument("--gil", action="store_true", help="only samples holding the GIL")
    parser.add_argument("--summarise", type=Path, help="only summarise this raw file")
    parser.add_argument("--requests", type=int, default=0, help="with --summarise: answered")
    args = parser.parse_args()
    if args.summarise:
        print(summary(args.summarise, args.top, args.requests))
        return 0
    print(
        profile(
            args.path,
            args.seconds,
            args.top,
            postgres=args.postgres,
            gil=args.gil,
            connections=args.connections,
            batch=args.batch,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
