"""A gateway told to stop (SIGTERM) lets the task calls it runs finish within its shutdown
grace, so their tasks settle with the upstream's answer rather than as lost workers."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.gateway_tasks.conftest import task_gateway, task_upstream
from tests.support.task_requester import ask

pytestmark = [pytest.mark.process]


async def test_a_task_call_in_flight_finishes_within_the_shutdown_grace(tmp_path: Path) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}"
    settings = {"EVENTLOG_WRITER_LEASE_SECONDS": "2", "EVENTLOG_LEASE_SWEEP_SECONDS": "0.5"}
    with (
        task_upstream(tmp_path) as upstream,
        task_gateway(upstream, database, tmp_path, settings) as gateway,
    ):
        url = f"{gateway.base_url}/mcp"
        async with httpx.AsyncClient(timeout=30) as client:
            params = {"name": "slow_compute", "arguments": {"seconds": 2, "label": "grace"}}
            task_id = (await ask(client, url, "tools/call", params))["result"]["taskId"]
            gateway.stop()  # SIGTERM, then waits for the process to end
            gateway.start()
            seen = await ask(client, url, "tasks/get", {"taskId": task_id})
    assert seen["result"]["status"] == "completed", seen
    assert seen["result"]["result"]["content"][0]["text"] == "computed grace"
