"""PostgreSQL restarted while a task's call runs: nothing is lost, the task settles.

The gateway runs the call against the upstream while its database goes away (a fast
stop, not a pause) and comes back; the upstream's answer arrives while the database is
still down, so the worker must hold the outcome and settle once it is back. The task
ends `completed` with the upstream's result, and its events are the ones stored.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway_tasks.conftest import task_gateway, task_upstream
from tests.support.private_postgres import PrivatePostgres, private_database
from tests.support.task_requester import ask, first_progress, request

pytestmark = [pytest.mark.process, pytest.mark.postgresql]


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    with private_database() as server:
        yield server


async def test_postgresql_restarted_mid_task_loses_nothing_and_the_task_settles(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    with (
        task_upstream(tmp_path) as upstream,
        task_gateway(upstream, private_pg.url, tmp_path) as gateway,
    ):
        url = f"{gateway.base_url}/mcp"
        async with httpx.AsyncClient(timeout=30) as client:
            params = {"name": "slow_compute", "arguments": {"seconds": 3, "label": "pg"}}
            created = await ask(client, url, "tools/call", params)
            task_id = created["result"]["taskId"]
            await first_progress(client, url, task_id)
            private_pg.stop("immediate")
            # The call answers (at 3 s) while the database is down.
            await asyncio.sleep(3.5)
            private_pg.start()
            async with asyncio.timeout(60):
                while True:
                    answer = await ask(client, url, "tasks/get", {"taskId": task_id})
                    if answer.get("result", {}).get("status") not in (None, "working"):
                        break
                    await asyncio.sleep(0.2)
            stream = await client.post(
                url, **request("tasks/stream", {"taskId": task_id, "after": 0})
            )
        assert "Task exception was never retrieved" not in gateway.log()
    task = answer["result"]
    assert task["status"] == "completed", task
    assert task["result"]["content"][0]["text"] == "computed pg"
    # The stored events, then the settled task: seqs from 1, in order, without a gap.
    lines = stream.text.splitlines()
    seqs = [int(line[4:]) for line in lines if line.startswith("id: ")]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    final = json.loads([line for line in lines if line.startswith("data: ")][-1][6:])
    assert final["result"]["status"] == "completed"
