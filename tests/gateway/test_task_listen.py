"""`notifications/tasks` on a listen stream (`app/gateway/task_listen.py`): which filters the
gateway answers, the acknowledgement first, then each visible task's state, every frame
tagged with the listen request's id."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.errors import UnknownTask
from app.gateway.task_listen import SUBSCRIPTION_ID, TaskListener, task_ids_only
from app.storage.tasks import TaskRecord
from tests.gateway.test_task_wire import record


@pytest.mark.parametrize(
    ("params", "ids"),
    [
        ({"notifications": {"taskIds": ["a", "b", "a"]}}, ["a", "b"]),
        ({"notifications": {"taskIds": []}}, []),
        ({"notifications": {"taskIds": ["a"], "toolsListChanged": True}}, None),
        ({"notifications": {"taskIds": "a"}}, None),
        ({"notifications": {"taskIds": [1]}}, None),
        ({}, None),
    ],
)
def test_only_a_filter_of_task_ids_alone_is_the_gateways(
    params: dict[str, Any], ids: list[str] | None
) -> None:
    assert task_ids_only(params) == ids


class Tasks:
    """The task service as the listener reads it: one settled task, the rest unknown."""

    async def get(self, tenant: str, task_id: str, principal: str | None) -> TaskRecord:
        if task_id != "t-1":
            raise UnknownTask(task_id)
        return record(status="completed", result={"content": []})


def message_of(frame: bytes) -> dict[str, Any]:
    text = frame.decode()
    assert text.startswith("event: message\ndata: ")
    assert text.endswith("\n\n")
    return json.loads(text.removeprefix("event: message\ndata: "))


async def test_the_acknowledgement_names_the_visible_tasks_then_each_state_follows() -> None:
    listener = TaskListener(Tasks(), "default")  # type: ignore[arg-type]
    frames = listener.frames(7, ["t-1", "unknown"], principal=None)
    try:
        acknowledged = message_of(await anext(frames))
        state = message_of(await anext(frames))
    finally:
        await frames.aclose()
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert acknowledged["params"]["notifications"] == {"taskIds": ["t-1"]}
    assert state["method"] == "notifications/tasks"
    assert (state["params"]["taskId"], state["params"]["status"]) == ("t-1", "completed")
    for frame in (acknowledged, state):
        assert frame["params"]["_meta"][SUBSCRIPTION_ID] == 7
