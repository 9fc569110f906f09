"""The gateway as task host (`app/gateway/task_host.py`): what it answers itself before it
reads the log or the upstream — removed methods, a requester that did not declare the
extension, `Mcp-Method` / `Mcp-Name` that do not match the body — and what it leaves to
plain forwarding. Tasks run across replicas are `tests/gateway_tasks`'."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.gateway import task_wire as wire
from app.gateway.task_host import TaskHost, _header_mismatch
from app.gateway.task_spec import TaskSpec

DECLARED = {"_meta": {wire.CAPABILITIES_META: {"extensions": {wire.EXTENSION: {}}}}}


def host() -> TaskHost:
    # Nothing asked here reaches the log or the upstream: placeholders stand for them.
    spec = TaskSpec.parse("slow,needed=required")
    return TaskHost(spec, object(), object(), object(), "default", 30)  # type: ignore[arg-type]


def body(method: object, params: dict[str, Any] | None = None) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 5, "method": method, "params": params or {}}
    ).encode()


@pytest.mark.parametrize(
    "sent",
    [
        b"not json",
        b"[1, 2]",
        body(7),
        body("ping"),
        body("tools/call", {"name": "plain", **DECLARED}),
        body("tools/call", {"name": "slow"}),
        body("subscriptions/listen", {"notifications": {"toolsListChanged": True}}),
    ],
    ids=[
        "not json",
        "a batch",
        "no method",
        "another method",
        "not a task tool",
        "an optional tool, undeclared",
        "another listen filter",
    ],
)
async def test_what_is_not_the_hosts_is_forwarded_as_it_came(sent: bytes) -> None:
    assert await host().answer(sent, [], None) is None


async def answered(sent: bytes, headers: list[tuple[str, str]] | None = None) -> tuple[int, Any]:
    response = await host().answer(sent, headers or [], None)
    assert response is not None
    return response.status_code, json.loads(response.body)


async def test_the_removed_methods_are_method_not_found() -> None:
    for method in ("tasks/result", "tasks/list"):
        status, answer = await answered(body(method))
        assert (status, answer["error"]["code"]) == (200, wire.METHOD_NOT_FOUND)


async def test_a_requester_without_the_extension_is_told_what_it_misses() -> None:
    for sent, headers in (
        (body("tasks/get", {"taskId": "t"}), [("Mcp-Name", "t")]),
        (body("tools/call", {"name": "needed"}), []),
        (body("subscriptions/listen", {"notifications": {"taskIds": ["t"]}}), []),
    ):
        status, answer = await answered(sent, headers)
        assert (status, answer["id"], answer["error"]["code"]) == (200, 5, wire.MISSING_CAPABILITY)


async def test_headers_that_do_not_match_the_body_are_refused_400() -> None:
    for headers in ([("Mcp-Name", "t-2")], []):
        status, answer = await answered(body("tasks/get", {"taskId": "t-1", **DECLARED}), headers)
        assert (status, answer["error"]["code"]) == (400, wire.HEADER_MISMATCH)


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ([("mcp-method", "tasks/get"), ("mcp-name", "t-1")], None),
        ([("Mcp-Method", "tasks/cancel"), ("Mcp-Name", "t-1")], "Mcp-Method"),
        ([("mcp-method", "tasks/get")], "missing"),
        ([("mcp-name", " t-2 ")], "does not match the request"),
    ],
)
def test_mcp_method_and_name_are_checked_against_the_body(
    headers: list[tuple[str, str]], why: str | None
) -> None:
    mismatch = _header_mismatch(headers, "tasks/get", "t-1")
    assert mismatch is None if why is None else why in (mismatch or "")
