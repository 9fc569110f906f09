"""A generation another process is writing, resumed through this MCP server: the store
follows its live tail until the response arrives (real processes: the service, the MCP
server with the store, the SDK's client; the test process is the other writer).

Why a writer process and not a second MCP server: the official SDK answers 404 to a
session another process opened before any store is asked (`docs/clients-python.md`,
"Another process's generation"). A writer that is not an MCP server (a job runner a tool
hands its work to) is what reaches this path with the SDK as it is.
"""

from __future__ import annotations

import json
import re

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_eventlog_client import EventLogClient, NewEvent
from mcp_eventlog_client.mcp import RESUME_REFUSED

from tests.support.deployment import Deployment
from tests.support.sdk_session import Progress, call_progress, mcp_client, progress_of, text_of

pytestmark = pytest.mark.process

WAIT = 30.0


def notification(step: int) -> NewEvent:
    """A progress notification, stored as the MCP stores store a message."""
    params = {"progressToken": "job-7", "progress": step, "total": 3}
    body = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
    return NewEvent(json.dumps(body), "message")


def response(request_id: int, text: str) -> NewEvent:
    """The tool's result, ending the request's stream."""
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return NewEvent(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}), "message")


PRIMING = NewEvent("", "priming")


async def scope_of(deployment: Deployment, session_id: str) -> str:
    async with httpx.AsyncClient() as http:
        answer = await http.get(f"{deployment.mcp}/test/scopes/{session_id}")
        scope: str = answer.json()["scope"]
        return scope


async def live_readers(deployment: Deployment) -> float:
    async with httpx.AsyncClient() as http:
        metrics = (await http.get(f"{deployment.eventlog}/metrics")).text
    match = re.search(r"^eventlog_live_readers (\S+)$", metrics, re.MULTILINE)
    return 0.0 if match is None else float(match.group(1))


async def readers_reach(deployment: Deployment, count: float) -> None:
    # Another process's gauge: nothing to await, so it is asked until it agrees.
    with anyio.fail_after(WAIT):
        while await live_readers(deployment) < count:  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def test_a_generation_another_process_writes_is_followed_until_its_response(
    deployment: Deployment,
) -> None:
    progress = Progress()
    results: list[types.CallToolResult] = []
    async with (
        mcp_client(deployment.mcp) as (session, session_ids, notifications),
        EventLogClient(deployment.eventlog) as writer,
    ):
        stream = f"mcp.{await scope_of(deployment, session_ids[0])}.77"
        gen = await writer.open_generation(stream, producer="job-runner")
        await writer.append(gen.token, [PRIMING, notification(1), notification(2)], first_seq=1)
        readers = await live_readers(deployment)
        async with anyio.create_task_group() as tasks:

            async def resume() -> None:
                token = f"{gen.token}:2"  # the client holds step 1
                results.append(await call_progress(session, progress, resumption_token=token))

            tasks.start_soon(resume)
            await readers_reach(deployment, readers + 1)  # the store follows the live tail
            await writer.append(gen.token, [notification(3)], first_seq=4)
            await writer.append(gen.token, [response(77, "done by the runner")], first_seq=5)
    assert text_of(results[0]) == "done by the runner"
    # Step 2 came from the stored page, step 3 and the result live: each once, in order.
    assert progress_of(notifications) == [2, 3]
    assert [t for t in progress.tokens if t.startswith(gen.token)] == [
        f"{gen.token}:{seq}" for seq in (3, 4, 5)
    ]


async def test_a_followed_generation_that_is_superseded_fails_the_request(
    deployment: Deployment,
) -> None:
    progress = Progress()
    async with (
        mcp_client(deployment.mcp) as (session, session_ids, notifications),
        EventLogClient(deployment.eventlog) as writer,
    ):
        stream = f"mcp.{await scope_of(deployment, session_ids[0])}.78"
        gen = await writer.open_generation(stream, producer="job-runner")
        await writer.append(gen.token, [PRIMING, notification(1)], first_seq=1)
        readers = await live_readers(deployment)
        refused: list[MCPError] = []
        async with anyio.create_task_group() as tasks:

            async def resume() -> None:
                with pytest.raises(MCPError) as error:
                    await call_progress(session, progress, resumption_token=f"{gen.token}:1")
                refused.append(error.value)

            tasks.start_soon(resume)
            await readers_reach(deployment, readers + 1)
            await writer.append(gen.token, [notification(2)], first_seq=3)
            await writer.open_generation(stream, producer="job-runner")  # a retry elsewhere
    (error,) = refused
    assert (error.code, error.data["verdict"], error.data["reason"]) == (
        RESUME_REFUSED,
        "reset",
        "superseded",
    )
    # What came before the reset (step 1 stored, step 2 live, after the priming event the
    # client held) is a true prefix; the refusal tells the client to discard it.
    assert progress_of(notifications) == [1, 2]
