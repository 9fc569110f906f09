"""deploy/nginx/gateway.conf, byte for byte, with Debian's nginx in front of two gateway
replicas on one PostgreSQL database (as tests/deploy/test_nginx.py runs eventlog.conf):
the SSE responses pass unbuffered, and a client cut mid-stream reconnects through nginx
to whichever replica and gets the rest exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.deploy.nginx import Nginx, require_nginx
from tests.gateway_matrix.conftest import two_replicas
from tests.support.processes import REPO, ServerProcess
from tests.support.tcp_proxy import TcpProxy
from tests.support.ts_harness import mcp_client, progress_of

pytestmark = [pytest.mark.process, pytest.mark.postgresql]

CONFIG = REPO / "deploy" / "nginx" / "gateway.conf"


@dataclass
class Stack:
    nginx: Nginx
    url: str
    upstream: ServerProcess
    replicas: tuple[ServerProcess, ServerProcess]


@pytest.fixture(scope="module")
def stack(postgres_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    executable = require_nginx()
    workdir = tmp_path_factory.mktemp("gateway-nginx")
    with two_replicas(postgres_database, workdir) as (up, a, b):
        nginx = Nginx(
            executable,
            workdir / "nginx",
            [a.base_url, b.base_url],
            config=CONFIG,
            folder="gateway.d",
        )
        with nginx.running() as url:
            yield Stack(nginx, url, up, (a, b))


def test_nginx_accepts_the_gateway_configuration(stack: Stack) -> None:
    checked = stack.nginx.check()
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("client", ["py", "ts-v2"])
async def test_progress_passes_nginx_unbuffered(stack: Stack, client: str) -> None:
    """Steps 1..4 reach the client while the upstream waits at step 4: nothing is held."""
    tag = f"nginx-unbuffered-{client}"
    program = [{"op": "call", "arguments": {"n": 6, "pause_at": 4, "tag": tag}}]
    async with mcp_client(client, stack.url, program) as run:
        await run.until(lambda r: len(r.of(0, "progress")) >= 4)
        assert not run.of(0, "result")
        async with httpx.AsyncClient() as http:
            gate = f"{stack.upstream.base_url}/test/gates/{tag}:continue"
            (await http.post(gate)).raise_for_status()
        await run.finished()
    assert progress_of(run, 0) == [1, 2, 3, 4, 5, 6]
    assert run.of(0, "result")[0]["text"] == "counted to 6"


@pytest.mark.parametrize("client", ["py", "ts-v1"])
async def test_a_client_cut_before_nginx_reconnects_through_it_exactly_once(
    stack: Stack, client: str
) -> None:
    tag = f"nginx-cut-{client}"
    program = [{"op": "call", "arguments": {"n": 8, "pause_at": 3, "tag": tag}}]
    with TcpProxy(stack.nginx.port) as proxy:
        async with mcp_client(client, proxy.base_url, program) as run:
            await run.until(lambda r: len(r.of(0, "progress")) >= 3)
            assert proxy.cut() >= 1
            async with httpx.AsyncClient() as http:
                gate = f"{stack.upstream.base_url}/test/gates/{tag}:continue"
                (await http.post(gate)).raise_for_status()
            await run.finished()
    assert progress_of(run, 0) == list(range(1, 9)), run.lines
    assert run.of(0, "result")[0]["text"] == "counted to 8"
