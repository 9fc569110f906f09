"""The gateway's tasks across two replicas on one PostgreSQL database, as processes:

- kill -9 the replica running a task mid-call: the other replica answers `failed` /
  `worker_lost` within the lease plus the sweep (a short lease here);
- another principal's `tasks/get` (and update, cancel) is byte for byte an unknown task's
  answer, and changes nothing;
- `tasks/stream` on the replica that does not run the call serves its progress events
  after a cursor, then the settled task; a cursor older than retention is `events_gone`
  (-32010) carrying `earliestSeq`.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.gateway_tasks.conftest import task_gateway, task_upstream
from tests.support.databases import empty_postgres
from tests.support.processes import ServerProcess
from tests.support.task_requester import ask, first_progress, request
from tests.support.waiting import until

pytestmark = [pytest.mark.process, pytest.mark.postgresql]

LEASE_SECONDS = 3  # renewed every second: two missed renewals on a loaded CI are not a loss
SWEEP_SECONDS = 0.5
MAX_EVENTS = 3  # a task's events beyond the last three are evicted
SETTINGS = {
    "EVENTLOG_WRITER_LEASE_SECONDS": str(LEASE_SECONDS),
    "EVENTLOG_LEASE_SWEEP_SECONDS": str(SWEEP_SECONDS),
    "EVENTLOG_DEFAULT_MAX_EVENTS": str(MAX_EVENTS),
}


@dataclass
class Replicas:
    upstream: ServerProcess
    first: ServerProcess
    second: ServerProcess

    def mcp(self, replica: ServerProcess) -> str:
        return f"{replica.base_url}/mcp"


@pytest.fixture(scope="module")
def replicas(
    postgres_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    workdir = tmp_path_factory.mktemp("task-replicas")
    asyncio.run(empty_postgres(postgres_database))
    with (
        task_upstream(workdir) as upstream,
        task_gateway(upstream, postgres_database, workdir, SETTINGS) as first,
        task_gateway(upstream, postgres_database, workdir, SETTINGS) as second,
    ):
        yield Replicas(upstream, first, second)


async def create(client: httpx.AsyncClient, url: str, arguments: dict[str, Any], **kw: Any) -> str:
    params = {"name": "slow_compute", "arguments": arguments}
    answer = await ask(client, url, "tools/call", params, **kw)
    assert answer["result"]["resultType"] == "task", answer
    task_id: str = answer["result"]["taskId"]
    return task_id


async def task_of(client: httpx.AsyncClient, url: str, task_id: str, **kw: Any) -> dict[str, Any]:
    answer = await ask(client, url, "tasks/get", {"taskId": task_id}, **kw)
    result: dict[str, Any] = answer["result"]
    return result


async def test_the_task_of_a_killed_replica_is_failed_worker_lost_on_the_other(
    replicas: Replicas,
) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        task_id = await create(client, replicas.mcp(replicas.first), {"seconds": 60, "label": "k"})
        # Mid-call: the upstream has reported progress, so the call is running on `first`.
        await first_progress(client, replicas.mcp(replicas.second), task_id)
        replicas.first.kill()
        killed = time.monotonic()
        try:
            other = replicas.mcp(replicas.second)
            seen = await task_of(client, other, task_id)
            assert seen["status"] == "working"  # the lease is not over yet
            while (seen := await task_of(client, other, task_id))["status"] == "working":  # noqa: ASYNC110 (another process's state)
                await asyncio.sleep(0.1)
            waited = time.monotonic() - killed
        finally:
            replicas.first.start()
    assert seen["status"] == "failed"
    assert seen["error"]["data"] == {"reason": "worker_lost"}
    assert "result" not in seen
    # Lease + sweep, and a second for a loaded machine's scheduling.
    assert waited <= LEASE_SECONDS + SWEEP_SECONDS + 1.0, waited


async def test_another_principals_task_is_an_unknown_task(replicas: Replicas) -> None:
    url = replicas.mcp(replicas.second)
    async with httpx.AsyncClient(timeout=30) as client:
        task_id = await create(client, url, {"seconds": 30, "label": "p"}, credential="alice")
        unknown = secrets.token_urlsafe(16)  # 22 characters, like a task id
        for method, extra in [
            ("tasks/get", {}),
            ("tasks/update", {"inputResponses": {"x": {"action": "accept"}}}),
            ("tasks/cancel", {}),
        ]:
            theirs = await client.post(
                url, **request(method, {"taskId": task_id, **extra}, "mallory")
            )
            nobodys = await client.post(
                url, **request(method, {"taskId": unknown, **extra}, "mallory")
            )
            assert theirs.status_code == nobodys.status_code == 200
            assert _without_id(theirs.json()) == _without_id(nobodys.json())
            assert theirs.json()["error"]["code"] == -32602
            assert "mallory" not in theirs.text
            assert task_id not in theirs.text
        # Nothing mallory sent touched alice's task, and alice still reads it.
        mine = await task_of(client, url, task_id, credential="alice")
        assert mine["status"] == "working"
        anonymous = await ask(client, url, "tasks/get", {"taskId": task_id})
        assert anonymous["error"]["code"] == -32602
        await ask(client, url, "tasks/cancel", {"taskId": task_id}, credential="alice")
        assert (await task_of(client, url, task_id, credential="alice"))["status"] == "cancelled"


def _without_id(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k != "id"}


async def test_tasks_stream_serves_the_progress_after_a_cursor_on_the_other_replica(
    replicas: Replicas,
) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        task_id = await create(client, replicas.mcp(replicas.first), {"seconds": 2, "label": "s"})
        other = replicas.mcp(replicas.second)
        # The requester follows on the other replica, leaves after the first event, and
        # comes back with its cursor.
        await first_progress(client, other, task_id)
        response = await client.post(
            other, **request("tasks/stream", {"taskId": task_id, "after": 1})
        )
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [
            json.loads(line[6:]) for line in response.text.splitlines() if line[:6] == "data: "
        ]
        ids = [int(line[4:]) for line in response.text.splitlines() if line[:4] == "id: "]
    assert ids == [2]  # after the cursor: the second (last) progress event
    assert events[0]["method"] == "notifications/progress"
    assert events[0]["params"]["progress"] == 2.0
    final = events[-1]["result"]
    assert final["status"] == "completed"
    assert final["result"]["content"][0]["text"] == "computed s"


async def test_tasks_stream_before_retention_is_events_gone(replicas: Replicas) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        url = replicas.mcp(replicas.second)
        task_id = await create(client, url, {"seconds": 5, "label": "g"})
        await until(lambda: settled(client, url, task_id))
        answer = await ask(client, url, "tasks/stream", {"taskId": task_id, "after": 0})
    assert answer["error"]["code"] == -32010
    assert answer["error"]["data"] == {"reason": "events_gone", "earliestSeq": 5 - MAX_EVENTS + 1}


async def settled(client: httpx.AsyncClient, url: str, task_id: str) -> bool:
    task = await task_of(client, url, task_id)
    assert task["status"] in ("working", "completed"), task  # settled otherwise: say how
    return task["status"] == "completed"


async def test_task_notifications_reach_a_listen_stream_on_the_other_replica(
    replicas: Replicas,
) -> None:
    first, second = replicas.mcp(replicas.first), replicas.mcp(replicas.second)
    async with httpx.AsyncClient(timeout=30) as client:
        params = {"name": "confirm_delete", "arguments": {"filename": "n.txt"}}
        created = await ask(client, first, "tools/call", params, credential="alice")
        task_id = created["result"]["taskId"]
        listen = {"notifications": {"taskIds": [task_id, "not-a-task"]}}
        heard: list[dict[str, Any]] = []
        async with (
            asyncio.timeout(30),
            client.stream(
                "POST", second, **request("subscriptions/listen", listen, "alice")
            ) as stream,
        ):
            async for line in stream.aiter_lines():
                if not line.startswith("data: "):
                    continue
                heard.append(json.loads(line[6:]))
                status = heard[-1]["params"].get("status")
                if status == "input_required":
                    answer = {"confirm": {"action": "accept", "content": {"confirm": True}}}
                    update = {"taskId": task_id, "inputResponses": answer}
                    await ask(client, first, "tasks/update", update, credential="alice")
                if status == "completed":
                    break
    acknowledged, *notes = heard
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert acknowledged["params"]["notifications"] == {"taskIds": [task_id]}
    assert {n["method"] for n in notes} == {"notifications/tasks"}
    assert all(n["params"]["taskId"] == task_id for n in notes)
    statuses = [n["params"]["status"] for n in notes]
    assert statuses[statuses.index("input_required") :][-1] == "completed"
    assert notes[-1]["params"]["result"]["content"][0]["text"] == "deleted n.txt"
    subscription = acknowledged["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
    assert all(
        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == subscription
        for n in notes
    )


async def test_a_cancel_on_the_other_replica_cuts_the_upstream_call(replicas: Replicas) -> None:
    """The replica running the call learns of a cancel taken by the other at its next
    renewal (a third of the lease) and closes the upstream call, which the upstream sees
    cut; the task stays `cancelled`."""
    calls = f"{replicas.upstream.base_url}/test/calls"
    async with httpx.AsyncClient(timeout=30) as client:
        task_id = await create(client, replicas.mcp(replicas.first), {"seconds": 30, "label": "c"})
        other = replicas.mcp(replicas.second)
        await first_progress(client, other, task_id)
        cut_before = (await client.get(calls)).json().get("slow_compute:cut", 0)
        cancelled = await ask(client, other, "tasks/cancel", {"taskId": task_id})
        assert cancelled["result"] == {"resultType": "complete"}

        async def cut() -> bool:
            return (await client.get(calls)).json().get("slow_compute:cut", 0) > cut_before

        started = time.monotonic()
        await until(cut)
        waited = time.monotonic() - started
        seen = await task_of(client, replicas.mcp(replicas.first), task_id)
    assert seen["status"] == "cancelled"
    assert "result" not in seen
    assert waited <= LEASE_SECONDS, waited


async def test_a_refused_discover_or_tools_list_keeps_the_upstreams_status(
    replicas: Replicas,
) -> None:
    """The gateway adds the extension to the upstream's answers, but a refusal (here the
    upstream's own -32020 for an `Mcp-Method` that is not the body's) reaches the requester
    as the upstream gave it: HTTP 400."""
    url = replicas.mcp(replicas.second)
    async with httpx.AsyncClient(timeout=30) as client:
        for method in ("server/discover", "tools/list"):
            sent = request(method, {})
            sent["headers"]["mcp-method"] = "tools/call"
            answer = await client.post(url, **sent)
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["code"] == -32020
            good = await ask(client, url, method, {})
            assert "result" in good, good
