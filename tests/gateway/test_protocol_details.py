"""Protocol details through the gateway, real processes on SQLite: a JSON-RPC batch
(2025-03-26) gets every answer and its generation ends with the last; a response id is
matched as a JSON value (`true` and `"1"` do not answer request 1); the upstream sees the
gateway's own `X-Forwarded-*`/`Forwarded`, never a client's forged ones (SIGTERM with
calls in flight is `test_app.py`'s)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.support.gateway import gateway_before, python_upstream_process
from tests.support.mcp_raw import open_session, post_sse, tool_call
from tests.support.upstreams import hostile_upstream_process

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The gateway's base URL, before `hostile_upstream.py`."""
    workdir = tmp_path_factory.mktemp("protocol-details")
    with gateway_before(hostile_upstream_process(workdir), workdir) as gateway:
        yield gateway.base_url


async def test_every_answer_of_a_batch_reaches_the_client(hostile: str) -> None:
    batch = [tool_call(11, n=1), {"jsonrpc": "2.0", "method": "notifications/x"}, tool_call(12)]
    ids: list[str] = []
    async with httpx.AsyncClient(base_url=hostile, timeout=30) as http:
        sid = await open_session(http, f"{hostile}/mcp")
        with anyio.fail_after(20):
            _, found = await post_sse(
                http, f"{hostile}/mcp", sid, batch, ids=ids, protocol="2025-03-26"
            )
        answers = [m["id"] for m in found if "result" in m]
        assert answers == [11, 12]
        # One generation, ended by the last answer.
        token = ids[-1].rsplit(":", 1)[0]
        generation = (await http.get(f"/admin/v1/generations/{token}")).json()
    assert {i.rsplit(":", 1)[0] for i in ids} == {token}
    assert generation["terminal"] is True
    assert generation["tail_seq"] == len(found)


async def test_a_response_id_is_compared_as_a_json_value(hostile: str) -> None:
    async with httpx.AsyncClient(base_url=hostile, timeout=30) as http:
        sid = await open_session(http, f"{hostile}/mcp")
        with anyio.fail_after(20):
            _, found = await post_sse(http, f"{hostile}/mcp", sid, tool_call(1, mode="spoofed-ids"))
    assert [m["id"] for m in found] == [True, "1", 1]
    assert found[-1]["result"]["content"][0]["text"] == "the real answer"


FORGED = {
    "x-forwarded-for": "6.6.6.6",
    "x-forwarded-host": "evil.example",
    "x-forwarded-proto": "https",
    "forwarded": "for=6.6.6.6;proto=https",
    "x-real-ip": "6.6.6.6",
}


async def _proxy_headers_seen(tmp_path: Path, env: dict[str, str]) -> tuple[str, set[str]]:
    """(the gateway's host, the proxy headers the upstream saw) for a session opened by a
    loopback client that sends `FORGED`."""
    upstream = python_upstream_process(tmp_path)
    with gateway_before(upstream, tmp_path, env=env) as gateway:
        async with httpx.AsyncClient(timeout=30, headers=FORGED) as http:
            await open_session(http, f"{gateway.base_url}/mcp")
            seen = (await http.get(f"{upstream.base_url}/test/seen")).json()
    return gateway.base_url.removeprefix("http://"), set(seen["proxy"][-1])


async def test_a_callers_forged_proxy_headers_are_replaced_by_the_gateways(
    tmp_path: Path,
) -> None:
    host, seen = await _proxy_headers_seen(tmp_path, {})
    assert seen == {
        "x-forwarded-for: 127.0.0.1",
        "x-forwarded-proto: http",
        f"x-forwarded-host: {host}",
        f'forwarded: for=127.0.0.1;proto=http;host="{host}"',
    }


async def test_a_trusted_proxys_headers_are_passed_on_with_the_gateways_hop(
    tmp_path: Path,
) -> None:
    trusted = {"EVENTLOG_GATEWAY_TRUSTED_PROXIES": '["127.0.0.0/8"]'}
    host, seen = await _proxy_headers_seen(tmp_path, trusted)
    assert seen == {
        "x-forwarded-for: 6.6.6.6, 127.0.0.1",
        "x-forwarded-proto: https",
        "x-forwarded-host: evil.example",
        f'forwarded: for=6.6.6.6;proto=https, for=127.0.0.1;proto=http;host="{host}"',
        "x-real-ip: 6.6.6.6",
    }
