"""The channel load process: `python -m bench.loads.channel_load < spec.json` prints one result.

`tokens`: one channel per token to `ws://127.0.0.1:<port>/v1/append`, each appending
`batch` progress notifications per frame to its generation, one frame at a time (a frame
is sent when the previous one's answer came: closed loop, as wrk's connections are), for
`duration` seconds after `warmup` seconds. The no-op endpoint (`bench/baselines/noop.py`) takes the
same frames. Result: frames/s, events/s, p50/p99 of a frame's round trip, errors.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import uvloop
from websockets.asyncio.client import ClientConnection, connect

from bench.loads.load import latency_summary
from bench.loads.payload import EVENT_TYPE, PROGRESS


async def _channel(
    ws: ClientConnection, token: str, batch: int, until: float, record_from: float
) -> tuple[list[float], int]:
    events = [{"event": EVENT_TYPE, "data": PROGRESS}] * batch
    samples: list[float] = []
    errors = 0
    n = 0
    while (now := time.perf_counter()) < until:
        n += 1
        frame = {"id": n, "generation": token, "events": events}
        await ws.send(json.dumps(frame, separators=(",", ":")))
        answer = json.loads(await ws.recv())
        if now >= record_from:
            samples.append(time.perf_counter() - now)
            errors += answer.get("status") not in (200, 201)
    return samples, errors


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Every channel for the spec's window; the pooled figures."""
    url = f"ws://127.0.0.1:{spec['port']}/v1/append"
    sockets = [
        await connect(url, compression=None, max_size=None, ping_interval=None)
        for _ in spec["tokens"]
    ]
    try:
        start = time.perf_counter() + spec.get("warmup", 0.2)
        until = start + spec["duration"]
        done = await asyncio.gather(
            *(
                _channel(ws, token, spec["batch"], until, start)
                for ws, token in zip(sockets, spec["tokens"], strict=True)
            )
        )
    finally:
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    samples = [s for channel_samples, _ in done for s in channel_samples]
    frames_per_s = len(samples) / spec["duration"]
    return {
        "channels": len(sockets),
        "connections": len(sockets),
        "batch": spec["batch"],
        "frames": len(samples),
        "requests_per_s": frames_per_s,
        "events_per_s": frames_per_s * spec["batch"],
        "errors": sum(errors for _, errors in done),
        **latency_summary(samples),
    }


def main() -> int:
    """Read the spec from stdin, print the result."""
    spec = json.loads(sys.stdin.readline())
    print(json.dumps(uvloop.run(run(spec))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
