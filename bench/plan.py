"""How big and how long each measurement is: the full run and the `--quick` smoke run."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Plan:
    """Sizes and durations of one run."""

    name: str
    rounds: int  # interleaved rounds of each side-by-side comparison
    append_seconds: float  # timed window of each throughput run (one round; wrk: whole s)
    latency_seconds: float  # timed window of each one-connection latency run
    warmup_seconds: float  # one untimed run on every server before the rounds (0: none)
    client_requests: int  # requests per client per round (store_event, HTTP clients)
    single_concurrency: int  # clients appending one event per request
    batch_concurrency: int  # clients appending `batch` events per request
    batch: int
    raw_seconds: float  # the in-process SQLite ceiling
    resume_sizes: tuple[int, ...]  # stored events when resume latency is measured
    resume_rounds: int  # round-robin visits of the per-size servers
    resume_seconds: float  # one visit
    resume_max_requests: int
    replay_events: int  # the long tail replayed page by page
    replay_page: int
    sdk_repeats: int  # replays of the SDK store per size
    peer_seconds: float  # each Redis measurement


FULL = Plan(
    name="full",
    rounds=6,
    append_seconds=3.0,
    latency_seconds=2.0,
    warmup_seconds=1.0,
    client_requests=300,
    single_concurrency=16,
    batch_concurrency=4,
    batch=100,
    raw_seconds=2.0,
    resume_sizes=(10_000, 100_000, 1_000_000),
    resume_rounds=3,
    resume_seconds=2.5,
    resume_max_requests=1_500,
    replay_events=100_000,
    replay_page=5_000,
    sdk_repeats=30,
    peer_seconds=4.0,
)

# The same loads (concurrency, batch, replay page), smaller and shorter: a smoke run.
QUICK = replace(
    FULL,
    name="quick",
    rounds=2,
    append_seconds=1.0,
    latency_seconds=1.0,
    warmup_seconds=0.0,
    client_requests=50,
    raw_seconds=0.5,
    resume_sizes=(2_000, 10_000, 20_000),
    resume_rounds=2,
    resume_seconds=0.3,
    resume_max_requests=200,
    replay_events=10_000,
    sdk_repeats=10,
    peer_seconds=0.5,
)
