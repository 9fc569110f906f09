"""A compressing upstream: whatever content coding it chooses, what reaches the client is
what it meant — a JSON response unchanged and unlabelled by a coding it is not in, an SSE
response recorded and relayed message by message.

Real processes on SQLite: the official Python SDK server behind Starlette's
`GZipMiddleware` with JSON responses, and `hostile_upstream.py` for a gzip SSE stream and
a body in a coding the gateway does not read (`br`, relayed as it came, labelled so).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import httpx
import pytest

from tests.gateway.clients import Progress, call_progress, mcp_client, text_of
from tests.support.gateway import (
    gateway_before,
    python_upstream_process,
)
from tests.support.mcp_raw import HEADERS, INIT, open_session, post_sse, tool_call
from tests.support.upstreams import hostile_upstream_process

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def gzip_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The gateway's MCP endpoint before the SDK server behind GZipMiddleware (JSON)."""
    workdir = tmp_path_factory.mktemp("gzip-upstream")
    upstream = python_upstream_process(workdir, "--json-response", "--gzip")
    with gateway_before(upstream, workdir) as gateway:
        yield f"{gateway.base_url}/mcp"


@pytest.fixture(scope="module")
def hostile_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The gateway's MCP endpoint before `hostile_upstream.py`."""
    workdir = tmp_path_factory.mktemp("hostile-encodings")
    with gateway_before(hostile_upstream_process(workdir), workdir) as gateway:
        yield f"{gateway.base_url}/mcp"


async def test_a_gzip_json_answer_comes_back_as_json(gzip_gateway: str) -> None:
    # A client that cannot decode anything, asking for nothing encoded.
    async with httpx.AsyncClient(timeout=30) as http:
        headers = {**HEADERS, "accept-encoding": "identity"}
        response = await http.post(gzip_gateway, json=INIT, headers=headers)
    assert response.status_code == 200
    assert "content-encoding" not in response.headers
    assert response.headers["content-type"].startswith("application/json")
    answer = json.loads(response.content)  # the bytes on the wire are the JSON
    assert answer["id"] == 0
    assert answer["result"]["serverInfo"]["name"] == "gateway-upstream"


async def test_the_official_client_works_through_a_compressing_upstream(
    gzip_gateway: str,
) -> None:
    async with mcp_client(gzip_gateway) as (session, _, _):
        with anyio.fail_after(30):
            result = await call_progress(session, Progress(), n=3)
    assert text_of(result) == "counted to 3"


async def test_a_gzip_sse_answer_is_recorded_and_relayed_decoded(hostile_gateway: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        sid = await open_session(http, hostile_gateway)
        with anyio.fail_after(20):
            response, found = await post_sse(
                http, hostile_gateway, sid, tool_call(5, mode="gzip-sse")
            )
    assert "content-encoding" not in response.headers
    assert found[0]["method"] == "notifications/progress"
    assert found[-1]["id"] == 5
    assert found[-1]["result"]["content"][0]["text"] == "gzip done"


async def test_a_body_in_a_coding_the_gateway_does_not_read_keeps_its_label(
    hostile_gateway: str,
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        sid = await open_session(http, hostile_gateway)
        headers = {**HEADERS, "mcp-session-id": sid}
        async with http.stream(
            "POST", hostile_gateway, json=tool_call(6, mode="br-json"), headers=headers
        ) as response:
            raw = b"".join([chunk async for chunk in response.aiter_raw()])
    assert response.headers["content-encoding"] == "br"
    assert raw == b"\x8b\x03\x80not decodable by the gateway\x03"
