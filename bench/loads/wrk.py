"""Append load from outside: `wrk` with `bench/loads/lua/append.lua`, or the Python load process.

`wrk` (a C load generator, Debian package `wrk`, installed by `make bench-tools`) is the
load of every append figure: it costs the shared 2-core machine far less CPU per request
than any Python client, so the server, not the load, sets the rate. It runs with as many
threads as connections (`-tN -cN`): connection i is thread i and appends to generation i.

When `wrk` is missing (or `BENCH_LOAD=python`), the same runs go through `bench/loads/load.py`
(asyncio, its own HTTP/1.1 client), and every result says `"load": "python"`; the report
prints that the fallback was used, since its ceiling is lower.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.loads.child import measure
from bench.loads.payload import append_body

HOST = "127.0.0.1"
SCRIPT = Path(__file__).resolve().parent / "lua" / "append.lua"
TIMEOUT_S = 120
_MARK = "WRK_JSON "


def tool() -> str:
    """`wrk` when it can be used, else `python` (and why, see `fallback_reason`)."""
    return "wrk" if fallback_reason() is None else "python"


def fallback_reason() -> str | None:
    """Why the Python load process is used instead of wrk; None when wrk is used."""
    if os.environ.get("BENCH_LOAD", "").lower() == "python":
        return "BENCH_LOAD=python"
    if shutil.which("wrk") is None:
        return "wrk is not installed (`make bench-tools` installs it with apt-get)"
    return None


def append(
    port: int,
    tokens: list[str],
    *,
    batch: int,
    seconds: float,
    warmup: float = 0.0,
) -> dict[str, Any]:
    """One connection per token, each POSTing `batch` events to its generation as fast as
    it is answered, for `seconds`. Requests/s, events/s, p50/p99 latency, errors."""
    if tool() == "wrk":
        if warmup > 0:
            _wrk(port, tokens, batch=batch, seconds=warmup)
        return _wrk(port, tokens, batch=batch, seconds=seconds)
    return _python(port, tokens, batch=batch, seconds=seconds, warmup=warmup)


def _wrk(port: int, tokens: list[str], *, batch: int, seconds: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(prefix="eventlog-body-", suffix=".json") as body:
        body.write(append_body(batch))
        body.flush()
        n = len(tokens)
        argv = ["wrk", f"-t{n}", f"-c{n}", f"-d{max(1, round(seconds))}s", "--timeout", "10s"]
        argv += ["-s", str(SCRIPT), f"http://{HOST}:{port}", "--", body.name, *tokens]
        done = subprocess.run(  # noqa: S603 (wrk from the PATH, our own arguments)
            argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith(_MARK)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    doc = json.loads(lines[-1][len(_MARK) :])
    errors = doc["errors"]
    # wrk counts every answer as a request and non-2xx/3xx ones also as status errors.
    bad = errors["status"] + errors["connect"] + errors["read"] + errors["write"]
    ok = doc["requests"] - errors["status"]
    elapsed = doc["duration_us"] / 1e6
    latency = doc["latency_us"]
    return {
        "load": "wrk",
        "connections": n,
        "requests": ok,
        "errors": bad + errors["timeout"],
        "requests_per_s": ok / elapsed,
        "events_per_s": ok * batch / elapsed,
        "p50_ms": latency["p50"] / 1e3,
        "p90_ms": latency["p90"] / 1e3,
        "p99_ms": latency["p99"] / 1e3,
        "mean_ms": latency["mean"] / 1e3,
    }


def _python(
    port: int, tokens: list[str], *, batch: int, seconds: float, warmup: float
) -> dict[str, Any]:
    result = measure(
        "bench.loads.load",
        {
            "kind": "append",
            "ports": [port],
            "tokens": tokens,
            "concurrency": len(tokens),
            "batch": batch,
            "duration": seconds,
            "warmup": warmup,
        },
    )
    return {"load": "python", "connections": len(tokens), **result}
