"""The operator's view of tasks: the admin API (list by status, one task with its attempts
and events), the CLI's `tasks` and `task` commands, on both databases."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.operators import (
    ADMIN,
    WRITER_A,
    KeyedApp,
    keyed_app,
    leave_logging_alone,
    ok,
)
from tests.support.operators import admin_cli as run

RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}

_leave_logging_alone = pytest.fixture(leave_logging_alone, autouse=True)
keyed = pytest.fixture(keyed_app, name="keyed")


@pytest.fixture
async def story(keyed: KeyedApp) -> dict[str, str]:
    """Three tasks of tenant `a`: one working with two progress events on its second
    attempt, one completed, one failed."""
    writer = keyed.as_key(WRITER_A)
    ids: dict[str, str] = {}
    for name in ("busy", "done", "broken"):
        task = await ok(await writer.post("/v1/tasks", json={"principal": name}), 201)
        ids[name] = task["task_id"]
    busy = ids["busy"]
    await ok(await writer.post(f"/v1/tasks/{busy}/attempts", json={"supersedes": 1}), 201)
    events = {"attempt": 2, "events": [{"data": "10%", "event": "progress"}, {"data": "20%"}]}
    await ok(await writer.post(f"/v1/tasks/{busy}/events", json=events), 201)
    done = {"attempt": 1, "status": "completed", "result": RESULT}
    await ok(await writer.post(f"/v1/tasks/{ids['done']}/status", json=done))
    broken = {"attempt": 1, "status": "failed", "error": {"code": -1, "message": "no"}}
    await ok(await writer.post(f"/v1/tasks/{ids['broken']}/status", json=broken))
    return ids


async def test_the_listing_filters_by_status_and_pages(
    keyed: KeyedApp, story: dict[str, str]
) -> None:
    admin = keyed.as_key(ADMIN)
    everything = await ok(await admin.get("/admin/v1/tasks"))
    assert {t["task_id"] for t in everything["tasks"]} == set(story.values())
    assert {t["tenant"] for t in everything["tasks"]} == {"a"}
    failed = await ok(await admin.get("/admin/v1/tasks", params={"status": "failed"}))
    assert [t["task_id"] for t in failed["tasks"]] == [story["broken"]]
    first = await ok(await admin.get("/admin/v1/tasks", params={"limit": 2}))
    rest = await ok(
        await admin.get("/admin/v1/tasks", params={"limit": 2, "cursor": first["next_cursor"]})
    )
    paged = [t["task_id"] for t in [*first["tasks"], *rest["tasks"]]]
    assert sorted(paged) == sorted(story.values())
    assert len(set(paged)) == 3
    bad = await admin.get("/admin/v1/tasks", params={"cursor": "nonsense"})
    assert (bad.status_code, bad.json()["code"]) == (422, "validation_error")
    wrong = await admin.get("/admin/v1/tasks", params={"status": "sleeping"})
    assert wrong.status_code == 422


async def test_one_task_with_its_attempts_and_events(
    keyed: KeyedApp, story: dict[str, str]
) -> None:
    admin = keyed.as_key(ADMIN)
    detail = await ok(await admin.get(f"/admin/v1/tasks/{story['busy']}"))
    assert (detail["task"]["status"], detail["task"]["attempt"]) == ("working", 2)
    assert detail["task"]["principal"] == "busy"
    assert [(g["epoch"], g["superseded"]) for g in detail["attempts"]] == [(1, True), (2, False)]
    assert [(e["seq"], e["event"], e["data"]) for e in detail["events"]] == [
        (1, "progress", "10%"),
        (2, None, "20%"),
    ]
    missing = await admin.get("/admin/v1/tasks/AAAAAAAAAAAAAAAAAAAAAA")
    assert (missing.status_code, missing.json()["code"]) == (404, "unknown_task")
    writer = await keyed.as_key(WRITER_A).get("/admin/v1/tasks")
    assert writer.status_code == 403


async def test_the_cli_lists_tasks_and_shows_one(keyed: KeyedApp, story: dict[str, str]) -> None:
    text = await run(keyed, "tasks", "--status", "completed")
    header, _, row = text.splitlines()
    assert header.split()[:4] == ["TASK", "TENANT", "STATUS", "ATTEMPT"]
    assert row.split()[:5] == [story["done"], "a", "completed", "1", "done"]
    text = await run(keyed, "task", "--", story["busy"])
    lines = text.splitlines()
    assert lines[0] == f"task {story['busy']} (tenant a): working, attempt 2"
    assert any(line.split()[:3] == ["1", "progress", "10%"] for line in lines)
    shown: dict[str, Any] = json.loads(await run(keyed, "--json", "task", "--", story["broken"]))
    assert shown["task"]["error"] == {"code": -1, "message": "no"}


async def test_metrics_count_tasks_by_status(keyed: KeyedApp, story: dict[str, str]) -> None:
    await keyed.app.state.api.container.task_sweeper.sweep_once()
    text = (await keyed.as_key(None).get("/metrics")).text
    for status, count in (("working", 1), ("completed", 1), ("failed", 1), ("cancelled", 0)):
        assert f'eventlog_tasks{{status="{status}"}} {count}.0' in text
