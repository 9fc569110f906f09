"""The documented Python example (`clients/python/examples/tasks_server.py`, docs/tasks.md) run
as written: two processes of it on one service, the official SDK's client calling a task
tool on one and reading the task on the other."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from mcp_eventlog_client.mcp.tasks import GetTaskRequest, PollTasks, TaskIdParams, send_task_request

from tests.support.processes import REPO, ServerProcess, free_port

EXAMPLE = REPO / "clients" / "python" / "examples" / "tasks_server.py"


@pytest.fixture
def replicas(base: str, tmp_path: Path) -> Iterator[list[str]]:
    urls: list[str] = []
    servers: list[ServerProcess] = []
    try:
        for _ in range(2):
            port = free_port()
            server = ServerProcess.program(
                [str(EXAMPLE), "--port", str(port)],
                port=port,
                log_path=tmp_path / f"example-{port}.log",
                env={"EVENTLOG_URL": base},
            )
            server.start()
            servers.append(server)
            urls.append(f"http://127.0.0.1:{port}/mcp")
        yield urls
    finally:
        for server in servers:
            server.stop()


def test_the_doc_shows_the_example_whole() -> None:
    doc = (REPO / "docs" / "tasks.md").read_text()
    section = doc.split("### A server on the Python SDK", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert block == EXAMPLE.read_text()


async def test_two_processes_of_the_example_serve_one_task(replicas: list[str]) -> None:
    one, two = replicas
    async with Client(one, extensions=[PollTasks()]) as first:
        created = await first.session.call_tool("slow_compute", {"n": 21}, allow_claimed=True)
        task_id = created.model_dump(by_alias=True)["taskId"]
    async with Client(two, extensions=[PollTasks()]) as second:
        for _ in range(100):
            task = await send_task_request(
                second.session, GetTaskRequest(params=TaskIdParams(taskId=task_id))
            )
            if task["status"] != "working":
                break
            await asyncio.sleep(0.05)
        assert task["status"] == "completed"
        assert task["result"]["content"][0]["text"] == "42"
        # The SDK's client, resolving the task transparently through the other process.
        result = await second.call_tool("slow_compute", {"n": 5})
        assert result.content[0].text == "10"  # type: ignore[union-attr]


async def test_a_tasks_request_whose_mcp_name_names_another_task_is_refused(
    replicas: list[str],
) -> None:
    one, _ = replicas
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tasks/get",
        "params": {"taskId": "A" * 22, "_meta": meta},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tasks/get",
    }
    async with httpx.AsyncClient() as http:
        matching = await http.post(one, json=body, headers={**headers, "mcp-name": "A" * 22})
        other = await http.post(one, json=body, headers={**headers, "mcp-name": "B" * 22})
    assert _answer(matching.text)["error"]["code"] == -32602  # unknown: the names agree
    assert _answer(other.text)["error"]["code"] == -32020


def _answer(text: str) -> dict[str, Any]:
    if not text.startswith("{"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    answer: dict[str, Any] = json.loads(text)
    return answer
