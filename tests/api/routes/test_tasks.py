"""The task API, route by route and rule by rule, on both databases."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import create_async_engine

from app.service.clock import utc_now
from app.settings import Settings
from app.storage.schema import tasks as tasks_table
from tests.support.app import make_settings, started_app, state_of

RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}
ERROR = {"code": -32000, "message": "it broke"}
ASKS = {"name": {"method": "elicitation/create", "params": {"message": "your name?"}}}


async def create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    answer = await client.post("/v1/tasks", json=body)
    assert answer.status_code == 201, answer.text
    task: dict[str, Any] = answer.json()
    return task


async def get(client: httpx.AsyncClient, task_id: str, principal: str | None) -> httpx.Response:
    params = {} if principal is None else {"principal": principal}
    return await client.get(f"/v1/tasks/{task_id}", params=params)


async def move(
    client: httpx.AsyncClient, task_id: str, attempt: int, status: str, **extra: Any
) -> httpx.Response:
    body = {"attempt": attempt, "status": status, **extra}
    return await client.post(f"/v1/tasks/{task_id}/status", json=body)


def code(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["code"]


# --- create and get -----------------------------------------------------------------------


async def test_create_answers_a_working_task_that_get_finds(client: httpx.AsyncClient) -> None:
    task = await create(
        client, principal="alice", ttl_ms=60_000, poll_interval_ms=250, request={"x": 1}
    )
    assert re.fullmatch(r"[A-Za-z0-9_-]{22,}", task["task_id"])  # >= 128 random bits
    assert (task["status"], task["attempt"], task["ttl_ms"], task["poll_interval_ms"]) == (
        "working",
        1,
        60_000,
        250,
    )
    assert task["result"] is None
    assert task["error"] is None
    assert task["input_requests"] is None
    found = await get(client, task["task_id"], "alice")
    assert found.status_code == 200
    assert found.json() == task


async def test_defaults_come_from_the_settings(database_url: str) -> None:
    settings = make_settings(
        database_url, task_default_ttl_ms=5_000, task_poll_interval_ms=42, writer_lease_seconds=7
    )
    async with started_app(settings) as (_app, client):
        task = await create(client)
    assert (task["ttl_ms"], task["poll_interval_ms"]) == (5_000, 42)
    assert task["lease_expires_at"] is not None


@pytest.mark.parametrize(
    "body",
    [
        {"ttl_ms": 0},
        {"ttl_ms": "5"},
        {"ttl_ms": 10**15},
        {"poll_interval_ms": -1},
        {"principal": ""},
        {"principal": "a\x00b"},
        {"request": [1, 2]},
        {"lease_seconds": 0},
        {"unknown": 1},
    ],
)
async def test_create_refuses_bad_bodies(client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    assert code(await client.post("/v1/tasks", json=body)) == (422, "validation_error")


async def test_unknown_expired_and_foreign_tasks_are_one_answer(database_url: str) -> None:
    keys = [
        {"scope": "writer", "tenant": "t1", "key": "writer-key-of-t1-xxxx"},
        {"scope": "writer", "tenant": "t2", "key": "writer-key-of-t2-xxxx"},
    ]
    async with started_app(make_settings(database_url, keys=keys)) as (_app, client):
        t1 = {"Authorization": "Bearer writer-key-of-t1-xxxx"}
        t2 = {"Authorization": "Bearer writer-key-of-t2-xxxx"}
        mine = (await client.post("/v1/tasks", json={"principal": "alice"}, headers=t1)).json()
        short = (await client.post("/v1/tasks", json={"ttl_ms": 1}, headers=t1)).json()
        await asyncio.sleep(0.05)
        task_id = mine["task_id"]
        answers = [
            await client.get(f"/v1/tasks/{task_id}", params={"principal": "bob"}, headers=t1),
            await client.get(f"/v1/tasks/{task_id}", headers=t1),  # no principal
            await client.get(f"/v1/tasks/{task_id}", params={"principal": "alice"}, headers=t2),
            await client.get("/v1/tasks/AAAAAAAAAAAAAAAAAAAAAA", headers=t1),  # never issued
            await client.get(f"/v1/tasks/{short['task_id']}", headers=t1),  # expired
        ]
        owner = await client.get(f"/v1/tasks/{task_id}", params={"principal": "alice"}, headers=t1)
    assert owner.status_code == 200
    bodies = {(a.status_code, a.headers["content-type"], a.content) for a in answers}
    assert len(bodies) == 1, bodies
    assert code(answers[0]) == (404, "unknown_task")


async def test_a_task_without_principal_is_read_without_one(client: httpx.AsyncClient) -> None:
    task = await create(client)
    assert (await get(client, task["task_id"], None)).status_code == 200
    assert code(await get(client, task["task_id"], "alice")) == (404, "unknown_task")


async def test_a_malformed_task_id_is_a_validation_error(client: httpx.AsyncClient) -> None:
    assert code(await client.get("/v1/tasks/a%00b")) == (422, "validation_error")
    assert code(await client.get("/v1/tasks/" + "a" * 65)) == (422, "validation_error")


# --- transitions --------------------------------------------------------------------------

PAYLOAD = {
    "completed": {"result": RESULT},
    "failed": {"error": ERROR},
    "cancelled": {},
    "input_required": {"input_requests": ASKS},
    "working": {},
}


@pytest.mark.parametrize(
    ("path", "final"),
    [
        (["completed"], "completed"),
        (["failed"], "failed"),
        (["cancelled"], "cancelled"),
        (["input_required", "working", "completed"], "completed"),
        (["input_required", "completed"], "completed"),
        (["input_required", "failed"], "failed"),
        (["input_required", "cancelled"], "cancelled"),
        (["input_required", "working", "input_required", "working", "failed"], "failed"),
    ],
)
async def test_the_allowed_transitions(
    client: httpx.AsyncClient, path: list[str], final: str
) -> None:
    task = await create(client, principal="p")
    for status in path:
        answer = await move(client, task["task_id"], 1, status, **PAYLOAD[status])
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == status
    found = (await get(client, task["task_id"], "p")).json()
    assert found["status"] == final
    assert found["result"] == (RESULT if final == "completed" else None)
    assert found["error"] == (ERROR if final == "failed" else None)
    assert found["lease_expires_at"] is None  # a settled task holds no worker


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        (["working"], "invalid_transition"),
        (["input_required", "input_required"], "invalid_transition"),
        *[
            ([end, then], "terminal")
            for end in ("completed", "failed", "cancelled")
            for then in ("working", "input_required", "completed", "failed", "cancelled")
        ],
    ],
)
async def test_the_refused_transitions(
    client: httpx.AsyncClient, path: list[str], refused: str
) -> None:
    task = await create(client, principal="p")
    *allowed, last = path
    for status in allowed:
        assert (await move(client, task["task_id"], 1, status, **PAYLOAD[status])).is_success
    before = (await get(client, task["task_id"], "p")).json()
    assert code(await move(client, task["task_id"], 1, last, **PAYLOAD[last])) == (409, refused)
    assert (await get(client, task["task_id"], "p")).json() == before  # nothing changed


@pytest.mark.parametrize(
    ("status", "extra"),
    [
        ("completed", {}),
        ("completed", {"result": RESULT, "error": ERROR}),
        ("failed", {}),
        ("failed", {"error": {"code": "x", "message": "m"}}),
        ("failed", {"error": {"code": True, "message": "m"}}),
        ("failed", {"error": {"code": 1}}),
        ("input_required", {}),
        ("input_required", {"input_requests": {}}),
        ("cancelled", {"result": RESULT}),
        ("working", {"input_requests": ASKS}),
        ("nonsense", {}),
    ],
)
async def test_a_status_change_carries_what_its_status_needs(
    client: httpx.AsyncClient, status: str, extra: dict[str, Any]
) -> None:
    task = await create(client)
    assert code(await move(client, task["task_id"], 1, status, **extra)) == (
        422,
        "validation_error",
    )


async def test_a_status_change_of_an_unknown_task_is_unknown_task(
    client: httpx.AsyncClient,
) -> None:
    answer = await move(client, "AAAAAAAAAAAAAAAAAAAAAA", 1, "completed", result=RESULT)
    assert code(answer) == (404, "unknown_task")


# --- fencing ------------------------------------------------------------------------------


async def take_over(client: httpx.AsyncClient, task_id: str, supersedes: int) -> httpx.Response:
    return await client.post(f"/v1/tasks/{task_id}/attempts", json={"supersedes": supersedes})


async def test_a_new_attempt_fences_the_old_worker(client: httpx.AsyncClient) -> None:
    task = await create(client, principal="p")
    task_id = task["task_id"]
    taken = await take_over(client, task_id, 1)
    assert taken.status_code == 201
    second = taken.json()
    assert second["attempt"] == 2
    assert second["generation"] != task["generation"]
    assert code(await move(client, task_id, 1, "completed", result=RESULT)) == (409, "superseded")
    assert code(await take_over(client, task_id, 1)) == (409, "superseded")  # one taker wins
    stale = await client.post(
        f"/v1/tasks/{task_id}/events", json={"attempt": 1, "events": [{"data": "x"}]}
    )
    assert code(stale) == (409, "superseded")
    # The old generation itself refuses its worker's appends (the ordinary append path).
    direct = await client.post(
        f"/v1/generations/{task['generation']}/events", json={"events": [{"data": "x"}]}
    )
    assert code(direct) == (409, "superseded")
    assert code(await move(client, task_id, 3, "completed", result=RESULT)) == (
        409,
        "unknown_attempt",
    )
    assert (await move(client, task_id, 2, "completed", result=RESULT)).status_code == 200
    # A stale worker learns it was superseded even after the task finished.
    assert code(await move(client, task_id, 1, "failed", error=ERROR)) == (409, "superseded")
    assert code(await take_over(client, task_id, 2)) == (409, "terminal")


async def test_lease_renewal_is_fenced_and_moves_the_lease(client: httpx.AsyncClient) -> None:
    task = await create(client, lease_seconds=60)
    task_id = task["task_id"]
    renewed = await client.post(
        f"/v1/tasks/{task_id}/lease", json={"attempt": 1, "status_message": "half way"}
    )
    assert renewed.status_code == 200
    assert renewed.json()["status_message"] == "half way"
    assert renewed.json()["lease_expires_at"] >= task["lease_expires_at"]
    await take_over(client, task_id, 1)
    stale = await client.post(f"/v1/tasks/{task_id}/lease", json={"attempt": 1})
    assert code(stale) == (409, "superseded")


# --- input and cancel ---------------------------------------------------------------------


async def test_input_is_taken_by_key_once(client: httpx.AsyncClient) -> None:
    task = await create(client, principal="p")
    task_id = task["task_id"]
    asks = {**ASKS, "age": {"method": "elicitation/create", "params": {}}}

    async def answer(responses: dict[str, Any], principal: str = "p") -> httpx.Response:
        body = {"principal": principal, "input_responses": responses}
        return await client.post(f"/v1/tasks/{task_id}/input", json=body)

    working = await answer({"name": "x"})  # nothing is asked yet: ignored
    assert (working.status_code, working.json()["accepted"]) == (200, [])
    await move(client, task_id, 1, "input_required", input_requests=asks)
    first = await answer({"name": "Ada", "color": "red"})
    assert first.json()["accepted"] == ["name"]
    again = await answer({"name": "Bob", "age": 36})
    assert again.json()["accepted"] == ["age"]
    assert again.json()["input_responses"] == {"name": "Ada", "age": 36}
    assert code(await answer({"name": "Eve"}, principal="mallory")) == (404, "unknown_task")
    shown = (await get(client, task_id, "p")).json()
    assert (shown["input_requests"], shown["input_responses"]) == (
        asks,
        {"name": "Ada", "age": 36},
    )
    await move(client, task_id, 1, "working")
    await move(client, task_id, 1, "completed", result=RESULT)
    assert code(await answer({"name": "late"})) == (409, "terminal")


async def test_cancel_is_idempotent_and_a_terminal_task_stays(client: httpx.AsyncClient) -> None:
    task = await create(client, principal="p")
    task_id = task["task_id"]
    url = f"/v1/tasks/{task_id}/cancel"
    assert code(await client.post(url, json={"principal": "x"})) == (404, "unknown_task")
    first = await client.post(url, json={"principal": "p"})
    again = await client.post(url, json={"principal": "p"})
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert (first.json()["status"], first.json()["cancel_requested"]) == ("cancelled", True)
    assert code(await move(client, task_id, 1, "completed", result=RESULT)) == (409, "terminal")
    done = await create(client)
    await move(client, done["task_id"], 1, "completed", result=RESULT)
    kept = await client.post(f"/v1/tasks/{done['task_id']}/cancel")
    assert (kept.json()["status"], kept.json()["result"]) == ("completed", RESULT)


# --- TTL and the worker lease -------------------------------------------------------------


async def test_a_task_is_kept_for_its_ttl_then_unknown_and_removed(database_url: str) -> None:
    # Time is the test's, not the machine's: a create that took longer than the TTL on a
    # loaded CI machine must not turn "kept for its TTL" into a coin toss.
    settings = make_settings(database_url, lease_sweep_seconds=0)
    start, later = utc_now(), timedelta(0)
    async with started_app(settings) as (app, client):
        container = state_of(app).container
        container.tasks._clock = container.task_sweeper._clock = lambda: start + later
        task = await create(client, ttl_ms=1_500)
        later = timedelta(milliseconds=1_400)
        assert (await get(client, task["task_id"], None)).status_code == 200
        later = timedelta(milliseconds=1_600)
        assert code(await get(client, task["task_id"], None)) == (404, "unknown_task")
        await container.task_sweeper.sweep_once()
    assert await _rows(database_url) == []


async def _rows(database_url: str) -> list[Any]:
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(select(tasks_table))).all())
    finally:
        await engine.dispose()


async def test_a_lapsed_lease_fails_the_task_when_read(database_url: str) -> None:
    settings = make_settings(database_url, lease_sweep_seconds=0)
    async with started_app(settings) as (_app, client):
        task = await create(client, principal="p", lease_seconds=1)
        await asyncio.sleep(1.2)
        found = (await get(client, task["task_id"], "p")).json()
        late = await move(client, task["task_id"], 1, "completed", result=RESULT)
        events = await client.get(f"/v1/tasks/{task['task_id']}/events", params={"principal": "p"})
    assert found["status"] == "failed"
    assert found["error"]["code"] == -32603
    assert found["error"]["data"] == {"reason": "worker_lost"}
    assert code(late) == (409, "terminal")
    assert events.json()["terminal"] is True  # its attempt's events ended with it


async def test_a_lapsed_lease_fails_the_task_when_its_worker_writes(database_url: str) -> None:
    settings = make_settings(database_url, lease_sweep_seconds=0)
    async with started_app(settings) as (_app, client):
        task = await create(client, principal="p", lease_seconds=1)
        await asyncio.sleep(1.2)
        late = await move(client, task["task_id"], 1, "completed", result=RESULT)
        found = (await get(client, task["task_id"], "p")).json()
    assert code(late) == (409, "terminal")
    assert found["error"]["data"]["reason"] == "worker_lost"


async def test_renewing_keeps_a_task_alive_past_its_lease(database_url: str) -> None:
    settings = make_settings(database_url, lease_sweep_seconds=0.2)
    async with started_app(settings) as (_app, client):
        task = await create(client, lease_seconds=1)
        for _ in range(4):
            await asyncio.sleep(0.5)
            renewed = await client.post(f"/v1/tasks/{task['task_id']}/lease", json={"attempt": 1})
            assert renewed.status_code == 200, renewed.text
        assert (await get(client, task["task_id"], None)).json()["status"] == "working"


async def test_the_sweep_settles_a_lapsed_task_once(database_url: str) -> None:
    settings = make_settings(database_url, lease_sweep_seconds=0)
    async with started_app(settings) as (app, client):
        task = await create(client, lease_seconds=1)
        await asyncio.sleep(1.2)
        sweeper = state_of(app).container.task_sweeper
        settled = await asyncio.gather(*(sweeper.sweep_once() for _ in range(5)))
        rows = await _rows(database_url)
        metrics = (await client.get("/metrics")).text
    assert sum(settled) == 1
    assert [(row.task_id, row.status) for row in rows] == [(task["task_id"], "failed")]
    assert rows[0].error["data"] == {"reason": "worker_lost"}
    assert 'eventlog_tasks{status="failed"} 1.0' in metrics
    assert "eventlog_tasks_worker_lost_total 1.0" in metrics


async def test_the_background_sweep_fails_a_lapsed_task_unread(database_url: str) -> None:
    settings = make_settings(database_url, lease_sweep_seconds=0.2)
    async with started_app(settings) as (_app, client):
        await create(client, lease_seconds=1)
        for _ in range(100):
            rows = await _rows(database_url)
            if rows[0].status == "failed":
                break
            await asyncio.sleep(0.1)
    assert rows[0].status == "failed"
    assert rows[0].error["data"] == {"reason": "worker_lost"}


# --- events -------------------------------------------------------------------------------


async def append(
    client: httpx.AsyncClient, task_id: str, attempt: int, *datas: str
) -> httpx.Response:
    body = {"attempt": attempt, "events": [{"data": d, "event": "progress"} for d in datas]}
    return await client.post(f"/v1/tasks/{task_id}/events", json=body)


async def test_events_are_appended_by_the_worker_and_paged(client: httpx.AsyncClient) -> None:
    task = await create(client, principal="p")
    task_id = task["task_id"]
    appended = await append(client, task_id, 1, "10%", "50%")
    assert appended.status_code == 201
    body = appended.json()
    assert body["event_ids"] == [f"{task['generation']}:1", f"{task['generation']}:2"]
    assert body["attempt"] == 1
    page = await client.get(f"/v1/tasks/{task_id}/events", params={"principal": "p"})
    assert page.status_code == 200
    got = page.json()
    assert [e["data"] for e in got["events"]] == ["10%", "50%"]
    assert (got["task_id"], got["attempt"], got["generation"]) == (task_id, 1, task["generation"])
    after = await client.get(f"/v1/tasks/{task_id}/events", params={"principal": "p", "after": 1})
    assert [e["data"] for e in after.json()["events"]] == ["50%"]
    beyond = await client.get(f"/v1/tasks/{task_id}/events", params={"principal": "p", "after": 9})
    assert code(beyond) == (409, "beyond_tail")
    foreign = await client.get(f"/v1/tasks/{task_id}/events", params={"principal": "q"})
    assert code(foreign) == (404, "unknown_task")


async def test_a_new_attempt_starts_a_new_generation_of_events(client: httpx.AsyncClient) -> None:
    task = await create(client)
    task_id = task["task_id"]
    await append(client, task_id, 1, "first run")
    await take_over(client, task_id, 1)
    await append(client, task_id, 2, "second run")
    page = (await client.get(f"/v1/tasks/{task_id}/events")).json()
    assert (page["attempt"], [e["data"] for e in page["events"]]) == (2, ["second run"])
    stream = (await client.get(f"/v1/streams/task:{task_id}")).json()
    assert (stream["generations"], stream["current"]["epoch"]) == (2, 2)


async def test_events_older_than_retained_are_evicted_with_the_earliest_seq(
    database_url: str,
) -> None:
    async with started_app(make_settings(database_url, default_max_events=3)) as (_app, client):
        task = await create(client)
        await append(client, task["task_id"], 1, *[str(n) for n in range(1, 6)])
        gone = await client.get(f"/v1/tasks/{task['task_id']}/events", params={"after": 0})
        kept = await client.get(f"/v1/tasks/{task['task_id']}/events", params={"after": 2})
    assert code(gone) == (410, "evicted")
    assert gone.json()["earliest_seq"] == 3
    assert [e["seq"] for e in kept.json()["events"]] == [3, 4, 5]


async def test_a_long_poll_answers_when_the_worker_appends(client: httpx.AsyncClient) -> None:
    task = await create(client)
    task_id = task["task_id"]

    async def later() -> None:
        await asyncio.sleep(0.3)
        await append(client, task_id, 1, "late")

    writer = asyncio.create_task(later())
    page = await client.get(f"/v1/tasks/{task_id}/events", params={"after": 0, "wait": 10})
    await writer
    assert [e["data"] for e in page.json()["events"]] == ["late"]


async def test_a_settled_task_ends_its_events(client: httpx.AsyncClient) -> None:
    task = await create(client)
    await append(client, task["task_id"], 1, "one")
    await move(client, task["task_id"], 1, "completed", result=RESULT)
    page = (await client.get(f"/v1/tasks/{task['task_id']}/events")).json()
    assert (page["terminal"], page["tail_seq"]) == (True, 1)
    late = await append(client, task["task_id"], 1, "two")
    assert code(late) == (409, "terminal")


async def test_the_live_route_needs_the_principal(client: httpx.AsyncClient) -> None:
    task = await create(client, principal="p")
    answer = await client.get(f"/v1/tasks/{task['task_id']}/live", params={"principal": "q"})
    assert code(answer) == (404, "unknown_task")


async def test_settings_reject_a_negative_sweep() -> None:
    with pytest.raises(ValueError, match="lease_sweep_seconds"):
        Settings(lease_sweep_seconds=-1)
