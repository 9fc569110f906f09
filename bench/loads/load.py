"""The load process: `python -m bench.loads.load < spec.json` prints one JSON result.

It runs apart from the servers under test (its own process, over 127.0.0.1), so the
servers' CPU is theirs alone, apart from the machine's second core that this shares.
Kinds of load:

- `append`: `concurrency` clients, each on its own kept connection and its own generation
  (opened first, outside the timed window, or given as `tokens`), POST `batch` events
  per request for `duration` seconds after `warmup` seconds. `open: false` targets a
  path as given (the no-op endpoint).
- `resume`: one client resumes each claim in turn (latency, not throughput).
- `replay`: resume after an id, then page `GET …/events?after=` to the tail.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import uvloop

from bench.loads.http_client import Connection
from bench.loads.payload import append_body

HOST = "127.0.0.1"


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def latency_summary(seconds: list[float]) -> dict[str, float]:
    """p50 / p99 / mean in milliseconds."""
    return {
        "p50_ms": percentile(seconds, 0.50) * 1e3,
        "p99_ms": percentile(seconds, 0.99) * 1e3,
        "mean_ms": (sum(seconds) / len(seconds) * 1e3) if seconds else 0.0,
    }


async def _open_generation(conn: Connection, stream_id: str) -> str:
    # Retention high enough that the timed window measures appends, not evictions.
    status, doc = await conn.json(
        "POST", f"/v1/streams/{stream_id}/generations", {"max_events": 1_000_000}
    )
    if status != 201:
        raise RuntimeError(f"open generation: {status} {doc}")
    token: str = doc["generation"]
    return token


async def run_append(spec: dict[str, Any]) -> dict[str, Any]:
    """Many clients appending as fast as they are answered; counts only the timed window."""
    ports: list[int] = spec["ports"]
    concurrency: int = spec["concurrency"]
    batch: int = spec["batch"]
    body = append_body(batch)
    conns = [Connection(HOST, ports[i % len(ports)]) for i in range(concurrency)]
    if "tokens" in spec:  # generations opened by the caller, one per client
        tokens = list(spec["tokens"])
    elif spec.get("open", True):
        tag = spec.get("tag", "bench")
        tokens = [await _open_generation(c, f"{tag}-append-{i}") for i, c in enumerate(conns)]
    else:
        tokens = ["noop"] * concurrency
    paths = [f"/v1/generations/{token}/events" for token in tokens]
    start = time.perf_counter() + spec["warmup"]
    end = start + spec["duration"]
    latencies: list[float] = []
    counts = {"ok": 0, "errors": 0}
    statuses: dict[str, int] = {}

    async def client(i: int) -> None:
        conn, path = conns[i], paths[i]
        while (now := time.perf_counter()) < end:
            status, _ = await conn.request("POST", path, body)
            if now >= start:
                latencies.append(time.perf_counter() - now)
                key = "ok" if status in (200, 201) else "errors"
                counts[key] += 1
                statuses[str(status)] = statuses.get(str(status), 0) + 1

    cpu_before = time.process_time()
    await asyncio.gather(*(client(i) for i in range(concurrency)))
    # The load process's own CPU share: near 1.0 would mean it, not the server, is the limit.
    cpu_share = (time.process_time() - cpu_before) / (time.perf_counter() - start + spec["warmup"])
    for conn in conns:
        await conn.close()
    elapsed = spec["duration"]
    return {
        "load_cpu_share": cpu_share,
        "requests": counts["ok"],
        "errors": counts["errors"],
        "statuses": statuses,
        "requests_per_s": counts["ok"] / elapsed,
        "events_per_s": counts["ok"] * batch / elapsed,
        **latency_summary(latencies),
    }


async def run_resume(spec: dict[str, Any]) -> dict[str, Any]:
    """One client, one resume at a time: the latency a reconnecting client sees."""
    conn = Connection(HOST, spec["port"])
    claims: list[list[str]] = spec["claims"]
    for stream_id, last_id in claims[: spec.get("warmup_requests", 20)]:
        await conn.json("POST", f"/v1/streams/{stream_id}/resume", {"last_event_id": last_id})
    latencies: list[float] = []
    verdicts: dict[str, int] = {}
    events = 0
    deadline = time.perf_counter() + spec["duration"]
    index = 0
    while time.perf_counter() < deadline and index < spec["max_requests"]:
        stream_id, last_id = claims[index % len(claims)]
        index += 1
        began = time.perf_counter()
        status, doc = await conn.json(
            "POST", f"/v1/streams/{stream_id}/resume", {"last_event_id": last_id}
        )
        latencies.append(time.perf_counter() - began)
        verdict = f"{status}:{doc.get('verdict')}:{doc.get('reason')}"
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        events += len(doc.get("events", ()))
    await conn.close()
    out: dict[str, Any] = {
        "requests": len(latencies),
        "verdicts": verdicts,
        "events_per_resume": events / max(1, len(latencies)),
        **latency_summary(latencies),
    }
    if spec.get("samples"):
        out["samples_ms"] = [round(s * 1e3, 4) for s in latencies]
    return out


async def run_replay(spec: dict[str, Any]) -> dict[str, Any]:
    """Resume far behind the tail, then page to it: the whole long tail, bounded pages."""
    conn = Connection(HOST, spec["port"])
    limit: int = spec["limit"]
    began = time.perf_counter()
    status, doc = await conn.json(
        "POST",
        f"/v1/streams/{spec['stream_id']}/resume",
        {"last_event_id": spec["last_event_id"], "limit": limit},
    )
    if status != 200 or doc["verdict"] != "resume":
        raise RuntimeError(f"replay resume: {status} {doc.get('verdict')} {doc.get('reason')}")
    token, events, pages = doc["generation"], len(doc["events"]), 1
    after = doc["next_after"]
    while after is not None:
        status, doc = await conn.json(
            "GET", f"/v1/generations/{token}/events?after={after}&limit={limit}"
        )
        if status != 200:
            raise RuntimeError(f"replay page after {after}: {status} {doc}")
        events += len(doc["events"])
        pages += 1
        after = doc["next_after"]
    elapsed = time.perf_counter() - began
    await conn.close()
    return {
        "events": events,
        "pages": pages,
        "seconds": elapsed,
        "events_per_s": events / elapsed,
    }


_KINDS = {"append": run_append, "resume": run_resume, "replay": run_replay}


def main() -> int:
    """Read the spec from stdin, run it, print the result as JSON."""
    spec = json.load(sys.stdin)
    result = uvloop.run(_KINDS[spec["kind"]](spec))
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
