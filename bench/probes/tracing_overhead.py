"""What tracing adds to an append and to a resume, in-process (figures for docs/traces.md).

`python -m bench.probes.tracing_overhead [--calls N] [--rounds R] [--database-url URL]` runs the
app in this process behind `httpx.ASGITransport` (no network, so the service's own share
shows), untraced and traced in alternating rounds on one fresh database (a SQLite file
unless a migrated URL is given), and prints the p50 and p90 of each call. Traced means
every span recorded and batched to an exporter that drops them: what the service pays,
without the collector's network. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from app.api.app import create_app
from app.settings import Settings
from app.storage.migrate import upgrade
from app.telemetry.tracing import Tracing


class Dropped(SpanExporter):
    """Takes every batch and keeps nothing: a collector with no cost of its own."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


async def one_round(settings: Settings, traced: bool, calls: int) -> dict[str, list[float]]:
    """Seconds each of `calls` appends (one ~200-byte event) and resumes (one event back)
    took, after a warm-up, with tracing on or off; and the process's CPU seconds for all
    of each (every thread: the writer's, the driver's, the span exporter's)."""
    tracing = None
    if traced:
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropped()))
        tracing = Tracing(provider)
    app = create_app(settings, tracing)
    timings: dict[str, list[float]] = {
        "append": [],
        "resume": [],
        "append cpu": [],
        "resume cpu": [],
    }
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            stream = f"overhead-{time.monotonic_ns()}"
            token = (await client.post(f"/v1/streams/{stream}/generations")).json()["generation"]
            event = {"events": [{"data": "x" * 200, "event": "progress"}]}
            for _ in range(20):  # warm-up: pools, caches, first statements
                await client.post(f"/v1/generations/{token}/events", json=event)
            cpu = time.process_time()
            for _ in range(calls):
                started = time.perf_counter()
                await client.post(f"/v1/generations/{token}/events", json=event)
                timings["append"].append(time.perf_counter() - started)
            timings["append cpu"].append(time.process_time() - cpu)
            tail = 20 + calls
            cpu = time.process_time()
            for _ in range(calls):
                claim = {"last_event_id": f"{token}:{tail - 1}"}
                started = time.perf_counter()
                answer = await client.post(f"/v1/streams/{stream}/resume", json=claim)
                timings["resume"].append(time.perf_counter() - started)
            timings["resume cpu"].append(time.process_time() - cpu)
            assert answer.json()["verdict"] == "resume"
    return timings


def percentile(values: list[float], fraction: float) -> float:
    """The value at `fraction` of the sorted sample, in microseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1e6


async def measure(database_url: str, calls: int, rounds: int) -> None:
    """Alternate untraced and traced rounds (so drift hits both alike); print the figures."""
    settings = Settings(database_url=database_url)
    totals: dict[bool, dict[str, list[float]]] = {False: {}, True: {}}
    for _ in range(rounds):
        for traced in (False, True):
            for call, seconds in (await one_round(settings, traced, calls)).items():
                totals[traced].setdefault(call, []).extend(seconds)
    print(f"{database_url.split(':')[0]}: {rounds} rounds x {calls} calls each, in-process")
    print(
        f"{'call':<8}{'off p50':>10}{'on p50':>10}{'added':>10}{'off p90':>10}{'on p90':>10}"
        f"{'CPU off':>10}{'CPU on':>10}{'added':>10}"
    )
    for call in ("append", "resume"):
        off, on = totals[False][call], totals[True][call]
        p50_off, p50_on = percentile(off, 0.5), percentile(on, 0.5)
        cpu_off = sum(totals[False][f"{call} cpu"]) / len(off) * 1e6
        cpu_on = sum(totals[True][f"{call} cpu"]) / len(on) * 1e6
        print(
            f"{call:<8}{p50_off:>8.0f}µs{p50_on:>8.0f}µs{p50_on - p50_off:>+8.0f}µs"
            f"{percentile(off, 0.9):>8.0f}µs{percentile(on, 0.9):>8.0f}µs"
            f"{cpu_off:>8.0f}µs{cpu_on:>8.0f}µs{cpu_on - cpu_off:>+8.0f}µs"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", help="a migrated database (default: a fresh SQLite)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        url = args.database_url
        if url is None:
            url = f"sqlite+aiosqlite:///{Path(directory) / 'overhead.db'}"
            upgrade(url)
        asyncio.run(measure(url, args.calls, args.rounds))


if __name__ == "__main__":
    main()
