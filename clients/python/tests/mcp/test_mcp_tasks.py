"""MCP's tasks extension on a server built with the official Python SDK (`mcp` 2.3), the
task record in a real service process: the SDK's own client calls a task tool on one server
and reads, answers and cancels the task through another that never saw it (two replicas
sharing only the log)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_eventlog_client.mcp.tasks import (
    CancelTaskRequest,
    EventLogTasks,
    EventLogTaskStore,
    GetTaskRequest,
    PollTasks,
    TaskIdParams,
    UpdateTaskParams,
    UpdateTaskRequest,
    current_task_run,
    send_task_request,
)
from mcp_eventlog_client.task_runner import TaskRunner
from mcp_eventlog_client.tasks import TaskClient

SERVER_ENV = {"EVENTLOG_LEASE_SWEEP_SECONDS": "0.5"}
ASKS = {"ok": {"method": "elicitation/create", "params": {"message": "go on?"}}}


RUNNERS: list[TaskRunner] = []


def replica(tasks: TaskClient) -> MCPServer:
    """One server process's worth of MCP server: its own runner, the shared log."""
    runner = TaskRunner(tasks, lease_seconds=5, poll_seconds=0.05)
    RUNNERS.append(runner)
    extension = EventLogTasks(
        runner,
        tools={"slow_compute", "confirm", "failing_job", "broken_tool", "wait_forever"},
        required={"must_be_task"},
        poll_interval_ms=50,
    )
    server = MCPServer("replica", extensions=[extension])

    @server.tool()
    async def slow_compute(n: int) -> str:
        run = current_task_run()  # None when the call runs synchronously
        if run is not None:
            await run.progress({"progress": 1, "total": 1})
        await asyncio.sleep(0.2)
        return f"{n * 2}"

    @server.tool()
    async def greet(name: str) -> str:
        return f"hello {name}"

    @server.tool()
    async def must_be_task() -> str:
        return "ran"

    @server.tool()
    async def failing_job() -> str:
        # A protocol error: the task is `failed` with it.
        raise MCPError(code=-32001, message="the job cannot run")

    @server.tool()
    async def broken_tool() -> str:
        # A tool error (the SDK answers it `isError: true`): the task is `completed`.
        raise RuntimeError("the tool broke")

    @server.tool()
    async def confirm() -> str:
        run = current_task_run()
        assert run is not None
        answers = await run.ask(ASKS)
        return "confirmed" if answers["ok"]["action"] == "accept" else "declined"

    @server.tool()
    async def wait_forever() -> str:
        await asyncio.sleep(60)
        return "never"

    return server


@pytest.fixture
async def tasks(base: str) -> AsyncIterator[TaskClient]:
    async with TaskClient(base) as client:
        yield client
        # The runners' coroutines end (and their tasks settle) before the client closes.
        while RUNNERS:
            await RUNNERS.pop().aclose()


def declares() -> list[Any]:
    # Declares the extension and claims the `task` result (`allow_claimed=True` returns it).
    return [PollTasks()]


async def poll(client: Client, task_id: str, until: set[str]) -> dict[str, Any]:
    for _ in range(200):
        task = await send_task_request(
            client.session, GetTaskRequest(params=TaskIdParams(taskId=task_id))
        )
        if task["status"] in until:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} never reached {until}")


async def test_a_task_made_on_one_replica_is_served_by_the_other(tasks: TaskClient) -> None:
    one, two = replica(tasks), replica(tasks)
    async with (
        Client(one, extensions=declares()) as first,
        Client(two, extensions=declares()) as second,
    ):
        created = await first.session.call_tool("slow_compute", {"n": 21}, allow_claimed=True)
        shown = created.model_dump(by_alias=True, exclude_none=True)
        assert (shown["resultType"], shown["status"], shown["pollIntervalMs"]) == (
            "task",
            "working",
            50,
        )
        task_id = shown["taskId"]
        # Durable before the answer: the other replica resolves it at once.
        seen = await send_task_request(
            second.session, GetTaskRequest(params=TaskIdParams(taskId=task_id))
        )
        assert seen["taskId"] == task_id
        assert seen["status"] in {"working", "completed"}
        done = await poll(second, task_id, {"completed", "failed"})
        assert done["status"] == "completed"
        assert done["result"]["content"][0]["text"] == "42"
        assert "resultType" not in done["result"]
        page = await tasks.events(task_id)
        assert [e.event for e in page.events] == ["progress"]

        # A task id that was never issued: -32602, as the extension says.
        with pytest.raises(MCPError) as unknown:
            await send_task_request(
                second.session, GetTaskRequest(params=TaskIdParams(taskId="A" * 22))
            )
        assert unknown.value.error.code == -32602


async def test_the_sdk_client_resolves_the_task_transparently(tasks: TaskClient) -> None:
    async with Client(replica(tasks), extensions=[PollTasks()]) as client:
        result = await client.call_tool("slow_compute", {"n": 5})
        assert result.content[0].text == "10"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as failed:
            await client.call_tool("failing_job", {})
        assert (failed.value.error.code, failed.value.error.message) == (
            -32001,
            "the job cannot run",
        )
        broken = await client.call_tool("broken_tool", {})
        assert broken.is_error


async def test_a_requester_without_the_extension_gets_the_call_run_or_32021(
    tasks: TaskClient,
) -> None:
    async with Client(replica(tasks)) as client:
        result = await client.session.call_tool("slow_compute", {"n": 1})
        assert result.content[0].text == "2"  # type: ignore[union-attr]
        assert (await client.session.call_tool("greet", {"name": "x"})).content[0].text == (  # type: ignore[union-attr]
            "hello x"
        )
        with pytest.raises(MCPError) as required:
            await client.session.call_tool("must_be_task", {})
        assert required.value.error.code == -32021
        with pytest.raises(MCPError) as undeclared:
            await send_task_request(
                client.session, GetTaskRequest(params=TaskIdParams(taskId="A" * 22))
            )
        assert undeclared.value.error.code == -32021


async def test_input_through_tasks_update_and_cancel_through_the_other_replica(
    tasks: TaskClient,
) -> None:
    one, two = replica(tasks), replica(tasks)
    async with (
        Client(one, extensions=declares()) as first,
        Client(two, extensions=declares()) as second,
    ):
        created = await first.session.call_tool("confirm", {}, allow_claimed=True)
        task_id = created.model_dump(by_alias=True)["taskId"]
        waiting = await poll(second, task_id, {"input_required"})
        assert waiting["inputRequests"] == ASKS
        update = UpdateTaskParams(taskId=task_id, inputResponses={"ok": {"action": "accept"}})
        ack = await send_task_request(second.session, UpdateTaskRequest(params=update))
        assert {k: v for k, v in ack.items() if k != "_meta"} == {"resultType": "complete"}
        done = await poll(second, task_id, {"completed", "failed"})
        assert done["result"]["content"][0]["text"] == "confirmed"

        created = await first.session.call_tool("wait_forever", {}, allow_claimed=True)
        task_id = created.model_dump(by_alias=True)["taskId"]
        ack = await send_task_request(
            second.session, CancelTaskRequest(params=TaskIdParams(taskId=task_id))
        )
        assert {k: v for k, v in ack.items() if k != "_meta"} == {"resultType": "complete"}
        cancelled = await poll(first, task_id, {"cancelled"})
        assert "result" not in cancelled


async def test_the_task_store_adapter_over_the_log(tasks: TaskClient) -> None:
    store = EventLogTaskStore(tasks, lease_seconds=5)
    created = await store.create(ttl_ms=60_000, principal="p")
    assert (created["status"], created["ttlMs"]) == ("working", 60_000)
    assert await store.get(created["taskId"], principal="q") is None
    assert await store.result(created["taskId"], principal="p") is None
    done = await store.complete(created["taskId"], {"content": [], "isError": False})
    assert done["status"] == "completed"
    assert await store.result(created["taskId"], principal="p") == {
        "content": [],
        "isError": False,
    }
    other = await store.create()
    failed = await store.fail(other["taskId"], {"code": -32000, "message": "no"})
    assert failed["error"] == {"code": -32000, "message": "no"}
    third = await store.create()
    assert (await store.cancel(third["taskId"]))["status"] == "cancelled"
