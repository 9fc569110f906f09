"""The task client and the task runner against a real service process (SQLite; PostgreSQL
under CI): every call, each refusal as its class, the runner's outcomes (completed, failed,
cancelled, input rounds, a silent task kept alive past three leases) and a task created by
one process read by another."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from contextlib import aclosing
from typing import Any

import pytest
from mcp_eventlog_client import (
    BeyondTail,
    EventPage,
    InvalidTransition,
    LiveEnd,
    LiveEvent,
    NewEvent,
    Superseded,
    TerminalGeneration,
    UnknownAttempt,
    UnknownTask,
    ValidationFailed,
)
from mcp_eventlog_client.task_runner import TaskFailed, TaskRun, TaskRunner
from mcp_eventlog_client.tasks import Task, TaskClient

from tests.support.processes import REPO, child_environment

# A quick sweep, so a lapsed lease is settled within a second of lapsing.
SERVER_ENV = {"EVENTLOG_LEASE_SWEEP_SECONDS": "0.5"}
RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}
ASKS = {"name": {"method": "elicitation/create", "params": {"message": "your name?"}}}


@pytest.fixture
async def tasks(base: str) -> Any:
    async with TaskClient(base) as client:
        yield client


# --- the calls, one by one ---------------------------------------------------------------


async def test_create_get_status_and_the_mcp_shape(tasks: TaskClient) -> None:
    task = await tasks.create(
        principal="alice", ttl_ms=60_000, poll_interval_ms=250, request={"name": "x"}
    )
    assert isinstance(task, Task)
    assert (task.status, task.attempt, task.ttl_ms, task.poll_interval_ms) == (
        "working",
        1,
        60_000,
        250,
    )
    assert not task.terminal
    assert task.lease_expires_at is not None
    seen = await tasks.get(task.task_id, principal="alice")
    assert (seen.task_id, seen.generation) == (task.task_id, task.generation)

    done = await tasks.set_status(task.task_id, 1, "completed", status_message="ok", result=RESULT)
    assert (done.status, done.result, done.terminal) == ("completed", RESULT, True)
    shown = done.to_mcp()
    assert shown["taskId"] == task.task_id
    assert (shown["status"], shown["result"], shown["ttlMs"], shown["statusMessage"]) == (
        "completed",
        RESULT,
        60_000,
        "ok",
    )
    assert shown["createdAt"].endswith("Z")


async def test_renew_append_events_and_follow(tasks: TaskClient) -> None:
    task = await tasks.create()
    renewed = await tasks.renew(task.task_id, 1, status_message="halfway")
    assert renewed.status_message == "halfway"
    assert renewed.lease_expires_at is not None
    assert task.lease_expires_at is not None
    assert renewed.lease_expires_at >= task.lease_expires_at

    appended = await tasks.append(
        task.task_id, 1, [NewEvent('{"progress": 1}', "progress"), NewEvent("two")], first_seq=1
    )
    assert (appended.tail_seq, appended.duplicate, appended.generation) == (
        2,
        False,
        task.generation,
    )
    assert appended.event_ids == (f"{task.generation}:1", f"{task.generation}:2")
    again = await tasks.append(
        task.task_id, 1, [NewEvent('{"progress": 1}', "progress"), NewEvent("two")], first_seq=1
    )
    assert again.duplicate

    page = await tasks.events(task.task_id, after=0)
    assert [(e.seq, e.event, e.data) for e in page.events] == [
        (1, "progress", '{"progress": 1}'),
        (2, None, "two"),
    ]
    assert (page.attempt, page.terminal, page.superseded) == (1, False, False)
    assert isinstance(page, EventPage)  # a page reader takes a task's page as any other
    assert (page.task_id, page.generation) == (task.task_id, task.generation)
    with pytest.raises(BeyondTail):
        await tasks.events(task.task_id, after=5)

    waiting = asyncio.create_task(tasks.events(task.task_id, after=2, wait=5))
    await asyncio.sleep(0.2)
    await tasks.append(task.task_id, 1, [NewEvent("three")])
    woke = await waiting
    assert [e.data for e in woke.events] == ["three"]

    await tasks.set_status(task.task_id, 1, "completed", result=RESULT)
    seen: list[Any] = []
    async with aclosing(tasks.follow(task.task_id)) as live:
        async for item in live:
            seen.append(item)
    assert [i.data for i in seen if isinstance(i, LiveEvent)] == ['{"progress": 1}', "two", "three"]
    assert isinstance(seen[-1], LiveEnd)


async def test_input_rounds_cancel_and_take_over(tasks: TaskClient) -> None:
    task = await tasks.create(principal="bob")
    waiting = await tasks.set_status(task.task_id, 1, "input_required", input_requests=ASKS)
    assert waiting.to_mcp()["inputRequests"] == ASKS
    answered = await tasks.answer(
        task.task_id, {"name": {"action": "accept"}, "other": 1}, principal="bob"
    )
    assert answered.accepted == ("name",)
    assert answered.task.input_responses == {"name": {"action": "accept"}}
    assert answered.task.to_mcp()["inputRequests"] == {}  # nothing outstanding

    newer = await tasks.take_over(task.task_id, 1, producer="second")
    assert (newer.attempt, newer.status) == (2, "input_required")
    assert newer.generation != task.generation
    with pytest.raises(Superseded):
        await tasks.renew(task.task_id, 1)
    with pytest.raises(Superseded):
        await tasks.take_over(task.task_id, 1)

    cancelled = await tasks.cancel(task.task_id, principal="bob")
    assert (cancelled.status, cancelled.cancel_requested) == ("cancelled", True)
    assert (await tasks.cancel(task.task_id, principal="bob")).status == "cancelled"
    with pytest.raises(TerminalGeneration):
        await tasks.set_status(task.task_id, 2, "completed", result=RESULT)
    with pytest.raises(TerminalGeneration):
        await tasks.answer(task.task_id, {"name": 1}, principal="bob")


async def test_refusals_are_the_clients_classes_by_code(tasks: TaskClient) -> None:
    task = await tasks.create(principal="carol")
    with pytest.raises(UnknownTask) as foreign:
        await tasks.get(task.task_id, principal="mallory")
    with pytest.raises(UnknownTask) as never:
        await tasks.get("A" * 22, principal="mallory")
    assert (foreign.value.status, foreign.value.detail) == (404, never.value.detail)
    with pytest.raises(UnknownAttempt):
        await tasks.renew(task.task_id, 7)
    with pytest.raises(InvalidTransition):
        await tasks.set_status(task.task_id, 1, "working")
    with pytest.raises(ValidationFailed):
        await tasks.set_status(task.task_id, 1, "completed")  # no result
    with pytest.raises(UnknownTask):
        await tasks.cancel("B" * 22)


# --- the runner --------------------------------------------------------------------------


async def test_the_runner_completes_with_the_result_and_records_progress(
    tasks: TaskClient,
) -> None:
    runner = TaskRunner(tasks, lease_seconds=5)

    async def work(run: TaskRun) -> dict[str, Any]:
        await run.progress({"progress": 1, "total": 2})
        await run.say("half")
        await run.progress({"progress": 2, "total": 2})
        return RESULT

    started = await runner.start(work, principal="dave", request={"name": "job"})
    # Durable before start() returned: a fresh client finds it.
    async with TaskClient(tasks.connection.base_url) as other:
        assert (await other.get(started.task.task_id, principal="dave")).attempt == 1
    settled = await started.wait()
    assert (settled.status, settled.result) == ("completed", RESULT)
    page = await tasks.events(settled.task_id, principal="dave")
    assert [json.loads(e.data)["progress"] for e in page.events] == [1, 2]
    assert page.terminal


async def test_the_runner_fails_a_task_whose_coroutine_raises(tasks: TaskClient) -> None:
    runner = TaskRunner(tasks, lease_seconds=5)

    async def refuses(run: TaskRun) -> dict[str, Any]:
        raise TaskFailed(-32602, "bad arguments", {"field": "x"})

    async def crashes(run: TaskRun) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    async def returns_nonsense(run: TaskRun) -> Any:
        return 42

    refused = await runner.run(refuses)
    assert (refused.status, refused.error) == (
        "failed",
        {"code": -32602, "message": "bad arguments", "data": {"field": "x"}},
    )
    crashed = await runner.run(crashes)
    assert (crashed.status, crashed.error) == (
        "failed",
        {"code": -32603, "message": "disk on fire"},
    )
    nonsense = await runner.run(returns_nonsense)
    assert nonsense.status == "failed"
    assert nonsense.error is not None
    assert nonsense.error["code"] == -32603


async def test_work_that_fails_before_it_runs_still_settles_its_task(tasks: TaskClient) -> None:
    runner = TaskRunner(tasks, lease_seconds=5)
    created: list[str] = []
    create = tasks.create

    async def recording_create(**options: Any) -> Task:
        task = await create(**options)
        created.append(task.task_id)
        return task

    def not_a_coroutine(run: TaskRun) -> Any:
        raise ValueError("no such job")

    tasks.create = recording_create  # type: ignore[method-assign]
    try:
        with pytest.raises(ValueError, match="no such job"):
            await runner.start(not_a_coroutine, principal="hank")
    finally:
        del tasks.create
    # The task it stored is failed with the error, not left working.
    failed = await tasks.get(created[0], principal="hank")
    assert failed.status == "failed"
    assert failed.error == {"code": -32603, "message": "no such job"}


async def test_a_cancel_stops_the_coroutine_and_the_task_stays_cancelled(
    tasks: TaskClient,
) -> None:
    runner = TaskRunner(tasks, lease_seconds=3, renew_every=0.2)
    stopped = asyncio.Event()

    async def forever(run: TaskRun) -> dict[str, Any]:
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()
        return RESULT

    started = await runner.start(forever, principal="erin")
    await tasks.cancel(started.task.task_id, principal="erin")
    settled = await asyncio.wait_for(started.wait(), 10)
    assert stopped.is_set()  # the heartbeat's 409 terminal cancelled the coroutine
    assert (settled.status, settled.cancel_requested, settled.result) == ("cancelled", True, None)


async def test_stopping_the_runner_settles_its_tasks_failed(tasks: TaskClient) -> None:
    runner = TaskRunner(tasks, lease_seconds=5)

    async def forever(run: TaskRun) -> dict[str, Any]:
        await asyncio.sleep(60)
        return RESULT

    started = await runner.start(forever)
    await runner.aclose()
    task = await tasks.get(started.task.task_id)
    assert task.status == "failed"
    assert task.error is not None
    assert task.error["data"] == {"reason": "worker_stopped"}


async def test_an_input_round_through_the_runner(tasks: TaskClient) -> None:
    runner = TaskRunner(tasks, lease_seconds=5, poll_seconds=0.05)

    async def greets(run: TaskRun) -> dict[str, Any]:
        answers = await run.ask(ASKS, status_message="who are you?")
        name = answers["name"]["content"]["name"]
        return {"content": [{"type": "text", "text": f"hello {name}"}], "isError": False}

    started = await runner.start(greets, principal="frank")
    task_id = started.task.task_id
    for _ in range(100):
        task = await tasks.get(task_id, principal="frank")
        if task.status == "input_required":
            break
        await asyncio.sleep(0.05)
    assert task.to_mcp()["inputRequests"] == ASKS
    await tasks.answer(
        task_id, {"name": {"action": "accept", "content": {"name": "Ann"}}}, principal="frank"
    )
    settled = await asyncio.wait_for(started.wait(), 10)
    assert settled.status == "completed"
    assert settled.result is not None
    assert settled.result["content"][0]["text"] == "hello Ann"


async def test_a_silent_task_outlives_three_leases_only_with_the_heartbeat(
    tasks: TaskClient,
) -> None:
    lease = 1
    runner = TaskRunner(tasks, lease_seconds=lease)

    async def silent(run: TaskRun) -> dict[str, Any]:
        await asyncio.sleep(3.5 * lease)
        return RESULT

    # The control: the same lease and nobody renewing it is failed worker_lost.
    unattended = await tasks.create(lease_seconds=lease)
    settled = await runner.run(silent)
    assert (settled.status, settled.result) == ("completed", RESULT)
    lost = await tasks.get(unattended.task_id)
    assert (lost.status, lost.worker_lost) == ("failed", True)


# --- across processes --------------------------------------------------------------------

READER = """
import asyncio, json, sys
from mcp_eventlog_client.tasks import TaskClient

async def main() -> None:
    async with TaskClient(sys.argv[1]) as tasks:
        task = await tasks.get(sys.argv[2], principal="gina")
        print(json.dumps(task.to_mcp()))

asyncio.run(main())
"""


async def test_a_task_created_by_one_process_is_read_by_another(tasks: TaskClient) -> None:
    runner = TaskRunner(tasks, lease_seconds=5)

    async def work(run: TaskRun) -> dict[str, Any]:
        return RESULT

    settled = await runner.run(work, principal="gina")
    reader = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", READER, tasks.connection.base_url, settled.task_id],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=child_environment({}),
        check=False,
    )
    assert reader.returncode == 0, reader.stderr
    shown = json.loads(reader.stdout)
    assert (shown["taskId"], shown["status"], shown["result"]) == (
        settled.task_id,
        "completed",
        RESULT,
    )
