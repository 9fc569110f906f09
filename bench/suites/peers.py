"""The peers, doing the same work in the same run: the SDK's in-memory store and Redis.

- The MCP SDK's example `InMemoryEventStore` (see `bench/baselines/sdk_store.py`), in-process: store
  N events, then replay after an id 5 events before the tail. Two shapes: one stream that
  holds all N events (a long tool call; the store's deque must be sized to N or it drops
  events silently), and N spread over streams of 200 like the service's seeded history
  (the SDK default keeps only 100 per stream, so there it is sized to 200 too).
- Redis Streams through redis-py's asyncio client on the local server: XADD per event
  from 16 clients, XADD pipelined 100 at a time, and XRANGE after an id near the tail of
  one of N/200 streams holding N events in all. Keys are under a per-run prefix and
  deleted afterwards.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import secrets
import time
from typing import Any

import pydantic
import redis.asyncio as aioredis
import uvloop
from mcp.server.streamable_http import EventMessage
from mcp.types import JSONRPCMessage

from bench.baselines.sdk_store import InMemoryEventStore
from bench.loads.load import latency_summary
from bench.loads.payload import EVENT_TYPE, PROGRESS

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
_REPLAY_BEHIND = 5


async def _sink(_message: EventMessage) -> None:
    return None


async def _sdk(n: int, per_stream: int, repeats: int) -> dict[str, Any]:
    message = pydantic.TypeAdapter(JSONRPCMessage).validate_json(PROGRESS)
    store = InMemoryEventStore(max_events_per_stream=per_stream)
    near_tail: list[str] = []
    began = time.perf_counter()
    for stream in range(max(1, n // per_stream)):
        ids = [await store.store_event(f"s-{stream}", message) for _ in range(per_stream)]
        near_tail.append(ids[-1 - _REPLAY_BEHIND])
    store_seconds = time.perf_counter() - began
    stored = len(store.event_index)
    latencies = []
    rng = random.Random(5)  # noqa: S311 (picks replay targets, not secrets)
    for _ in range(repeats):
        last_id = rng.choice(near_tail)
        t0 = time.perf_counter()
        await store.replay_events_after(last_id, _sink)
        latencies.append(time.perf_counter() - t0)
    del store
    gc.collect()
    return {
        "stored": stored,
        "store_events_per_s": stored / store_seconds,
        **latency_summary(latencies),
    }


def sdk_store(n: int, *, repeats: int) -> dict[str, dict[str, Any]]:
    """Store n events and replay near the tail, as one stream and as streams of 200."""
    return {
        "one_stream": uvloop.run(_sdk(n, n, repeats)),
        "streams_of_200": uvloop.run(_sdk(n, 200, repeats * 10)),
    }


async def _redis_append(
    client: aioredis.Redis, prefix: str, *, concurrency: int, batch: int, duration: float
) -> dict[str, Any]:
    fields: dict[Any, Any] = {"event": EVENT_TYPE, "data": PROGRESS}
    end = time.perf_counter() + duration
    count = 0

    async def one(i: int) -> None:
        nonlocal count
        key = f"{prefix}append-{batch}-{i}"
        while time.perf_counter() < end:
            if batch == 1:
                await client.xadd(key, fields)
            else:
                async with client.pipeline(transaction=False) as pipe:
                    for _ in range(batch):
                        pipe.xadd(key, fields)
                    await pipe.execute()
            count += batch

    await asyncio.gather(*(one(i) for i in range(concurrency)))
    return {"events_per_s": count / duration, "concurrency": concurrency, "batch": batch}


async def _redis_seed(
    client: aioredis.Redis, prefix: str, first: int, streams: int
) -> list[tuple[str, str]]:
    fields: dict[Any, Any] = {"event": EVENT_TYPE, "data": PROGRESS}
    claims = []
    for index in range(first, first + streams):
        key = f"{prefix}s-{index}"
        async with client.pipeline(transaction=False) as pipe:
            for _ in range(200):
                pipe.xadd(key, fields)
            ids = await pipe.execute()
        claims.append((key, ids[-1 - _REPLAY_BEHIND].decode()))
    return claims


async def _redis_xrange(
    client: aioredis.Redis, claims: list[tuple[str, str]], *, duration: float, max_requests: int
) -> dict[str, Any]:
    latencies: list[float] = []
    rng = random.Random(7)  # noqa: S311 (picks replay targets, not secrets)
    end = time.perf_counter() + duration
    while time.perf_counter() < end and len(latencies) < max_requests:
        key, last_id = rng.choice(claims)
        t0 = time.perf_counter()
        await client.xrange(key, min=f"({last_id}", max="+", count=500)
        latencies.append(time.perf_counter() - t0)
    return {"requests": len(latencies), **latency_summary(latencies)}


async def _redis(sizes: list[int], *, duration: float, max_requests: int) -> dict[str, Any]:
    prefix = f"bench:{secrets.token_hex(4)}:"
    client = aioredis.Redis.from_url(REDIS_URL, max_connections=32)
    try:
        await client.ping()
        out: dict[str, Any] = {
            "xadd": await _redis_append(client, prefix, concurrency=16, batch=1, duration=duration),
            "xadd_pipelined": await _redis_append(
                client, prefix, concurrency=4, batch=100, duration=duration
            ),
            "xrange": {},
        }
        claims: list[tuple[str, str]] = []
        for n in sizes:
            claims += await _redis_seed(client, prefix, len(claims), n // 200 - len(claims))
            out["xrange"][str(n)] = await _redis_xrange(
                client, claims, duration=duration, max_requests=max_requests
            )
        return out
    finally:
        async for key in client.scan_iter(match=f"{prefix}*", count=1000):
            await client.unlink(key)
        await client.aclose()


def redis_streams(sizes: list[int], *, duration: float, max_requests: int) -> dict[str, Any]:
    """XADD rates and XRANGE-after-id latency at each size (the same run, the same bytes)."""
    return uvloop.run(_redis(sizes, duration=duration, max_requests=max_requests))


def redis_available() -> bool:
    """Whether the local Redis answers."""

    async def probe() -> bool:
        client = aioredis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
        try:
            return bool(await client.ping())
        except (OSError, aioredis.RedisError):
            return False
        finally:
            await client.aclose()

    return uvloop.run(probe())
