"""Two gateway processes on one PostgreSQL database, behind a switchable TCP proxy (a load
balancer's failover): the client's reconnect lands on the replica that never read the
upstream while the first one still does, and it gets exactly what it missed, then the
live rest. And PostgreSQL restarted mid-stream: nothing the client was shown is lost.

Real processes: the Python SDK upstream (no event store, `tests/support/upstreams`), two
`mcp-eventlog gateway` processes sharing the database and the scope secret, the official
clients. Orderings are awaited on the clients' output and the upstream's gates.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway_matrix.conftest import failed_over_mid_call, matrix_gateway, two_replicas
from tests.support.private_postgres import PrivatePostgres, private_database
from tests.support.processes import ServerProcess
from tests.support.ts_harness import CLIENTS, mcp_client, progress_of
from tests.support.upstreams import open_gate, upstream_process
from tests.support.waiting import until

pytestmark = [pytest.mark.process, pytest.mark.postgresql]

RESET = -32010  # the contract's refusal code for `reset`


@pytest.fixture(scope="module")
def replicas(
    postgres_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, ServerProcess, ServerProcess]]:
    """The Python SDK upstream and two gateways in front of it on one PostgreSQL database."""
    workdir = tmp_path_factory.mktemp("replicas")
    with two_replicas(postgres_database, workdir) as replicas:
        yield replicas


async def steps_sent(upstream: ServerProcess, tag: str) -> int:
    async with httpx.AsyncClient() as client:
        steps: int = (await client.get(f"{upstream.base_url}/test/steps/{tag}")).json()["steps"]
        return steps


@pytest.mark.parametrize("client", CLIENTS)
async def test_the_reconnect_lands_on_the_other_replica_while_the_first_still_reads(
    replicas: tuple[ServerProcess, ServerProcess, ServerProcess], client: str
) -> None:
    upstream, _, second = replicas
    tag = f"replica-{client}"
    # Steps 5..10 are read by the FIRST gateway (its upstream response is still open),
    # recorded, and must reach the client through the second one, live.
    run, proxy = await failed_over_mid_call(client, replicas, tag, n=10, pause_at=4)
    assert progress_of(run, 0) == list(range(1, 11)), run.lines
    (result,) = run.of(0, "result")
    assert result["text"] == "counted to 10"
    assert second.port in proxy.targets, "the reconnect never reached the second replica"
    assert await steps_sent(upstream, tag) == 10


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of our own, to restart mid-stream."""
    with private_database() as server:
        yield server


async def verdict_once_back(base_url: str, event_id: str) -> str:
    """The log's verdict on `event_id` (REST `POST /v1/resume`), asked until the database
    answers and the generation is no longer open-and-resumable (the fence is async)."""
    verdicts: list[str] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:

        async def decided() -> bool:
            answer = await http.post("/v1/resume", json={"last_event_id": event_id})
            if answer.status_code == 200 and answer.json()["verdict"] != "resume":
                verdicts.append(str(answer.json()["verdict"]))
            return bool(verdicts)

        await until(decided)
    return verdicts[0]


async def test_postgresql_restarted_mid_stream_loses_nothing_the_client_was_shown(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    """The database goes away and comes back while a call streams: the call ends with its
    result, every id the client was shown is stored, and a resume from the first id ends
    visibly — the generation it names lacks the messages relayed while the database was
    away, so it is fenced (`reset`), even when the unstored message was the response
    itself (until 2026-12-02 that left the generation open: the resume waited for ever)."""
    with upstream_process("python", tmp_path) as up:
        mcp = f"{up.base_url}/mcp"
        with matrix_gateway(mcp, private_pg.url, tmp_path) as gateway:
            tag = "pg-restart"
            program = [
                {"op": "call", "arguments": {"n": 12, "pause_at": 4, "tag": tag}},
                {"op": "wait"},  # until the database is back and the fence is in the log
                {"op": "resume", "token": {"call": 0, "index": 1}, "timeout_ms": 30000},
            ]
            async with mcp_client("py", gateway.base_url, program) as run:
                await run.until(lambda r: len(r.of(0, "progress")) >= 4)
                private_pg.stop("immediate")
                await open_gate(up.base_url, f"{tag}:continue")
                await run.until(lambda r: len(r.of(0, "progress")) >= 8)
                private_pg.start()
                await run.until(lambda r: bool(r.of(1, "waiting")), within=60)
                first = run.of(0, "token")[1]["token"]  # step 1's id: the one resumed
                assert await verdict_once_back(gateway.base_url, first) == "reset"
                await run.go_on()
                await run.finished(within=90)
            # Messages relayed while the database was down carry no `id:` line, and an SSE
            # event without one keeps the last id (the spec's last-event-id buffer): the
            # client is shown the last *stored* id again, never a new one.
            shown = list(dict.fromkeys(line["token"] for line in run.of(0, "token")))
            async with httpx.AsyncClient(base_url=gateway.base_url, timeout=10) as http:
                for event_id in shown:
                    token, seq = event_id.rsplit(":", 1)
                    page = await http.get(
                        f"/v1/generations/{token}/events", params={"after": int(seq) - 1}
                    )
                    assert page.status_code == 200, page.text
                    assert page.json()["events"][0]["seq"] == int(seq), (event_id, page.text)
    assert progress_of(run, 0) == list(range(1, 13)), run.lines
    (result,) = run.of(0, "result")
    assert result["text"] == "counted to 12"
    # The resume from step 1's id: the generation lacks steps 5..8, so it is `reset`
    # (superseded by the one the gateway opened once the database was back).
    assert not run.of(2, "result"), run.lines
    (refusal,) = run.of(2, "error")
    assert refusal["code"] == RESET, run.lines
    assert (refusal["data"] or {}).get("verdict") == "reset", run.lines
