"""Background tasks: started and stopped together; one that dies is reported, shown as
not ready while it is down, and restarted."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from app.errors import StorageError
from app.service.background import Background, periodically
from app.service.observer import Observer
from app.settings import Settings
from tests.support.app import started_app, state_of


class Failures(Observer):
    def __init__(self) -> None:
        self.tasks: list[str] = []
        self.reported = asyncio.Event()

    def background_failed(self, task: str) -> None:
        self.tasks.append(task)
        self.reported.set()


async def test_a_task_that_dies_is_reported_and_restarted() -> None:
    failures = Failures()
    runs = 0
    second_run = asyncio.Event()

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise RuntimeError("one bad entry")
        second_run.set()
        await asyncio.Event().wait()  # runs until cancelled

    background = Background(failures, first_delay=0.01)
    background.add("flaky", flaky)
    background.start()
    try:
        async with asyncio.timeout(30):
            await second_run.wait()
        assert failures.tasks == ["flaky"]
        assert background.down == frozenset()
    finally:
        await background.stop()


async def test_a_dead_task_makes_the_process_unready_until_restarted(settings: Settings) -> None:
    async with started_app(settings) as (app, client):
        container = state_of(app).container
        assert (await client.get("/readyz")).status_code == 200
        failures = Failures()

        async def dies() -> None:
            raise RuntimeError("boom")

        # A background set of its own, watched by the same readiness check.
        probe = Background(failures, first_delay=60)
        probe.add("probe", dies)
        container.background, original = probe, container.background
        probe.start()
        try:
            async with asyncio.timeout(30):
                await failures.reported.wait()
            unready = await client.get("/readyz")
            assert unready.status_code == 503
            assert unready.json()["code"] == "background_task_down"
            assert "probe" in unready.json()["detail"]
        finally:
            await probe.stop()
            container.background = original
        assert (await client.get("/readyz")).status_code == 200


async def test_metrics_count_background_failures(settings: Settings) -> None:
    async with started_app(settings) as (app, client):
        state_of(app).container.observer.background_failed("retention-worker")
        text = (await client.get("/metrics")).text
        assert 'eventlog_background_task_failures_total{task="retention-worker"} 1.0' in text


async def test_stop_ends_a_task_that_swallowed_its_cancellation() -> None:
    # SQLAlchemy turns a cancelled asyncpg call into a connection error, which a job's own
    # error handling absorbs: the job goes on as if it had never been cancelled.
    swallowed = asyncio.Event()

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                if swallowed.is_set():
                    raise
                swallowed.set()

    background = Background(first_delay=0.01)
    background.add("stubborn", stubborn)
    background.start()
    await asyncio.sleep(0)
    async with asyncio.timeout(30):
        await background.stop()
    assert swallowed.is_set()


async def test_a_periodic_step_that_fails_on_storage_is_logged_and_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    steps = 0
    third = asyncio.Event()

    async def step() -> None:
        nonlocal steps
        steps += 1
        if steps == 1:
            raise StorageError("database away")
        if steps == 3:
            third.set()

    logger = logging.getLogger("tests.periodic")
    with caplog.at_level(logging.WARNING, logger="tests.periodic"):
        loop = asyncio.create_task(periodically(0.01, step, logger=logger, failed="sweep: %s"))
        try:
            await asyncio.wait_for(third.wait(), 5)
        finally:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
    assert [r.getMessage() for r in caplog.records] == ["sweep: database away"]


async def test_a_periodic_step_failing_otherwise_ends_the_loop() -> None:
    async def step() -> None:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        await asyncio.wait_for(
            periodically(0.01, step, logger=logging.getLogger("tests.periodic"), failed="%s"), 5
        )
