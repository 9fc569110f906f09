"""The task record's use cases (app/service/tasks.py), built from exactly the settings
slices they take: a task's TTL and poll interval by default from `TaskSettings`, its TTL's
ceiling and its events' size from the stream rules, its worker's lease from the lease
slice. The task API's rules, route by route, are in tests/api/routes/test_tasks.py."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from app.domain.decision import TerminalPolicy
from app.errors import InvalidRequest
from app.service.eventlog import WriteLimits
from app.service.tasks import TaskService
from app.settings.slices import LeaseSettings, StreamRules, TaskSettings
from app.storage import generations
from app.storage.database import Database
from tests.support.services import default_bodies, opened_database, writer_service

RULES = StreamRules(
    terminal_resume=TerminalPolicy.RESET,
    default_max_events=9,
    max_events_limit=90,
    default_ttl_seconds=600,
    max_ttl_seconds=60,
)
LEASES = LeaseSettings(writer_lease_seconds=13, sweep_seconds=0, resume_catchup_ms=0)
TASKS = TaskSettings(default_ttl_ms=45_000, poll_interval_ms=700)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    async with opened_database(database_url) as database:
        yield database


@pytest.fixture
def tasks(database: Database) -> TaskService:
    limits = WriteLimits(RULES, default_bodies(), LEASES)
    return TaskService(database, writer_service(database, limits), TASKS, limits)


async def _events_bound(database: Database, token: str) -> int:
    gen = await database.read(lambda conn: generations.get(conn, token))
    return gen.max_events


async def test_a_task_takes_its_defaults_from_its_slices(
    tasks: TaskService, database: Database
) -> None:
    task = await tasks.create("t", principal=None)
    assert (task.ttl_ms, task.poll_interval_ms, task.lease_seconds) == (45_000, 700, 13)
    assert await _events_bound(database, task.generation) == 9
    asked = await tasks.create(
        "t", principal=None, ttl_ms=60_000, poll_interval_ms=5, lease_seconds=2
    )
    assert (asked.ttl_ms, asked.poll_interval_ms, asked.lease_seconds) == (60_000, 5, 2)


async def test_a_task_outliving_the_stream_rules_is_refused(tasks: TaskService) -> None:
    with pytest.raises(InvalidRequest, match=re.escape("ttl_ms is over the limit (60000)")):
        await tasks.create("t", principal=None, ttl_ms=60_001)


async def test_a_new_attempt_takes_the_lease_slice_and_the_rules_event_bound(
    tasks: TaskService, database: Database
) -> None:
    task = await tasks.create("t", principal=None, lease_seconds=2)
    taken = await tasks.new_attempt("t", task.task_id, supersedes=1)
    assert (taken.attempt, taken.lease_seconds) == (2, 13)
    assert taken.generation != task.generation
    assert await _events_bound(database, taken.generation) == 9
