"""End to end, real processes: the event-log service, an MCP server using the store, the SDK client.

One service and one MCP server serve the whole module (per backend); tests keep apart by
session. Every ordering across processes is awaited (progress callbacks, resumption
tokens, gates in `tests.support.mcp_server`), never slept for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_eventlog_client.mcp import RESUME_REFUSED

from tests.support.deployment import Deployment, open_gate, service
from tests.support.processes import eventlog_service, free_port, mcp_server
from tests.support.sdk_session import Progress, call_progress, mcp_client, progress_of, text_of

pytestmark = pytest.mark.process

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


async def test_a_stream_closed_by_the_server_resumes_exactly_once_in_order(
    deployment: Deployment,
) -> None:
    progress = Progress()
    async with mcp_client(deployment.mcp) as (session, _, _):
        result = await call_progress(
            session, progress, n=8, close_at=3, tag="closed", replay_after="done"
        )
    assert text_of(result) == "counted to 8"
    assert progress.steps == [1, 2, 3, 4, 5, 6, 7, 8]
    # Steps 4-8 and the result came through a reconnection with Last-Event-ID. The ids the
    # client saw are one generation's seqs without gap or repeat: the priming event (1),
    # the eight notifications and the result.
    assert {token.rsplit(":", 1)[0] for token in progress.tokens} == {
        progress.tokens[0].rsplit(":", 1)[0]
    }
    assert [int(token.rsplit(":", 1)[1]) for token in progress.tokens] == list(range(1, 11))


async def test_a_resumed_stream_goes_on_live_without_a_gap_or_a_repeat(
    deployment: Deployment,
) -> None:
    progress = Progress()
    async with mcp_client(deployment.mcp) as (session, _, _), anyio.create_task_group() as tasks:
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(
                await call_progress(session, progress, n=6, close_at=3, pause_at=3, tag="live")
            )

        tasks.start_soon(call)
        # Ids 1-4 (priming, steps 1-3; step 3 live or replayed) and then the priming
        # event the SDK sends once the resumed stream is registered for live messages.
        await progress.tokens_counted(5).wait()
        await open_gate(deployment, "live:continue")
    assert text_of(results[0]) == "counted to 6"
    assert progress.steps == [1, 2, 3, 4, 5, 6]
    generation = progress.tokens[0].rsplit(":", 1)[0]
    # The resumed connection's priming event is not stored: it repeats the last id the
    # client has (seq 4), and the stream goes on from seq 5 in the same generation.
    seqs = [1, 2, 3, 4, 4, 5, 6, 7, 8]
    assert progress.tokens == [f"{generation}:{seq}" for seq in seqs]


async def test_a_token_captured_by_one_client_resumes_on_a_new_connection(
    deployment: Deployment,
) -> None:
    first = Progress()
    session_ids: list[str] = []
    with anyio.CancelScope() as first_client:
        async with (
            mcp_client(deployment.mcp, end_session=False) as (session, session_ids, _),
            anyio.create_task_group() as tasks,
        ):
            tasks.start_soon(
                lambda: call_progress(
                    session, first, n=6, pause_at=3, tag="moved", replay_after="done"
                )
            )
            await first.at(3).wait()
            # The first client goes away at once, call and connection and all (the session
            # stays on the server): only the token it captured survives.
            first_client.cancel()
    token = first.token_of(3)
    assert first.steps == [1, 2, 3]

    second = Progress()
    results: list[types.CallToolResult] = []
    with anyio.fail_after(10):
        async with (
            mcp_client(deployment.mcp, session_id=session_ids[0], initialize=False) as (
                session,
                _,
                notifications,
            ),
            anyio.create_task_group() as tasks,
        ):

            async def resume() -> None:
                results.append(await call_progress(session, second, resumption_token=token))

            tasks.start_soon(resume)
            await open_gate(deployment, "moved:continue")
    assert text_of(results[0]) == "counted to 6"
    # The replayed notifications carry the first call's progress token, which this
    # connection never issued: they reach the session as unsolicited notifications.
    assert progress_of(notifications) == [4, 5, 6]
    # Exactly what followed the token: steps 4-6 (seqs 5-7) and the result (seq 8).
    generation, _ = token.rsplit(":", 1)
    replayed = [t for t in second.tokens if t.startswith(f"{generation}:")]
    assert replayed == [f"{generation}:{seq}" for seq in (5, 6, 7, 8)]


@pytest.fixture(scope="module")
def small_deployment(
    deployment: Deployment, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """A second MCP server on the same service, keeping only 3 events per generation."""
    workdir = tmp_path_factory.mktemp("e2e-small")
    with mcp_server(deployment.eventlog, workdir, "--max-events", "3") as url:
        yield Deployment(deployment.eventlog, url)


async def supersede(deployment: Deployment, token: str) -> None:
    """Open a new generation of the token's stream, as a failed-over writer would."""
    answer = await service(deployment, "POST", "/v1/resume", {"last_event_id": token})
    await service(deployment, "POST", f"/v1/streams/{answer['stream_id']}/generations")


async def terminate(deployment: Deployment, token: str) -> None:
    """Finish the token's generation at its current tail."""
    generation = token.rsplit(":", 1)[0]
    await service(
        deployment,
        "POST",
        f"/v1/generations/{generation}/events",
        {"events": [], "terminal": True},
    )


@pytest.mark.parametrize("spoil", [supersede, terminate], ids=["superseded", "terminal"])
async def test_a_token_of_a_spoiled_generation_fails_the_request_without_splicing(
    deployment: Deployment, spoil: Callable[[Deployment, str], Awaitable[None]]
) -> None:
    tag = f"spoiled-{spoil.__name__}"
    progress = Progress()
    async with mcp_client(deployment.mcp) as (session, _, notifications):
        async with anyio.create_task_group() as tasks:
            refused: list[MCPError] = []

            async def call() -> None:
                with pytest.raises(MCPError) as error:
                    await call_progress(
                        session, progress, n=5, pause_at=2, close_on_gate=True, tag=tag
                    )
                refused.append(error.value)

            tasks.start_soon(call)
            await progress.at(2).wait()
            await spoil(deployment, progress.token_of(2))
            # Now the server drops the stream; the client reconnects with Last-Event-ID.
            await open_gate(deployment, f"{tag}:close")
        await open_gate(deployment, f"{tag}:continue")
    reason = "superseded" if spoil is supersede else "terminal"
    assert refused[0].code == RESUME_REFUSED
    assert refused[0].data["verdict"] == "reset"
    assert refused[0].data["reason"] == reason
    # Nothing after the token reached the client: no spliced stream.
    assert progress.steps == [1, 2]
    assert progress_of(notifications) == [1, 2]


async def test_a_token_whose_events_were_evicted_fails_the_request(
    small_deployment: Deployment,
) -> None:
    progress = Progress()
    refused: list[MCPError] = []
    async with (
        mcp_client(small_deployment.mcp) as (session, _, _),
        anyio.create_task_group() as tasks,
    ):

        async def call() -> None:
            with pytest.raises(MCPError) as error:
                await call_progress(
                    session,
                    progress,
                    n=6,
                    pause_at=1,
                    close_on_gate=True,
                    tag="evicted",
                    replay_after="done",
                )
            refused.append(error.value)

        tasks.start_soon(call)
        await progress.at(1).wait()
        await open_gate(small_deployment, "evicted:close")
        # Steps 2-6 and the result are stored while the client is away; only the
        # last 3 events are kept, so those after its token are gone.
        await open_gate(small_deployment, "evicted:continue")
    assert (refused[0].code, refused[0].data["reason"]) == (RESUME_REFUSED, "evicted")
    assert progress.steps == [1]


async def test_a_token_of_another_session_replays_nothing(deployment: Deployment) -> None:
    theirs = Progress()
    async with mcp_client(deployment.mcp) as (session, _, _):
        result = await call_progress(session, theirs, n=3, tag="theirs")
    assert text_of(result) == "counted to 3"
    stolen = theirs.token_of(1)

    mine = Progress()
    async with mcp_client(deployment.mcp) as (session, _, notifications):
        with pytest.raises(MCPError) as refused:
            await call_progress(session, mine, resumption_token=stolen)
    assert (refused.value.code, refused.value.data["reason"]) == (RESUME_REFUSED, "cross_session")
    assert mine.steps == []
    assert progress_of(notifications) == []
    # The service itself would resume it: the refusal is the store keeping sessions apart.
    answer = await service(deployment, "POST", "/v1/resume", {"last_event_id": stolen})
    assert (answer["verdict"], [e["seq"] for e in answer["events"]]) == ("resume", [3, 4, 5])


async def test_twenty_sessions_stream_at_once(deployment: Deployment) -> None:
    outcomes: dict[int, tuple[str, list[float]]] = {}

    async def one(index: int) -> None:
        progress = Progress()
        async with mcp_client(deployment.mcp) as (session, _, _):
            result = await call_progress(
                session, progress, n=5, close_at=2, tag=f"many-{index}", replay_after="done"
            )
        outcomes[index] = (text_of(result), progress.steps)

    with anyio.fail_after(40):
        async with anyio.create_task_group() as tasks:
            for index in range(20):
                tasks.start_soon(one, index)
    assert outcomes == {i: ("counted to 5", [1, 2, 3, 4, 5]) for i in range(20)}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def outage_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database for a service that a test stops and starts again."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'eventlog.db'}"
    url: str = request.getfixturevalue("postgres_database")
    return url


async def test_the_session_outlives_the_service_being_down(
    outage_database: str, tmp_path: Path
) -> None:
    port = free_port()
    service_up = eventlog_service(outage_database, tmp_path, port)
    eventlog = service_up.__enter__()
    try:
        with mcp_server(eventlog, tmp_path) as url, anyio.fail_after(60):
            async with mcp_client(url) as (session, _, _):
                before = await call_progress(session, Progress(), n=2, tag="before")
                service_up.__exit__(None, None, None)
                service_up = None
                down = Progress()
                # Every message of this call fails to store; each is still sent live.
                during = await call_progress(session, down, n=3, tag="down")
                service_up = eventlog_service(outage_database, tmp_path, port)
                service_up.__enter__()
                # The store fails fast for `outage_seconds` (1 s) after it found the service
                # down; a restart quicker than that would see this call's stores fail too.
                await anyio.sleep(1.2)
                after = await call_progress(session, Progress(), n=2, tag="after")
                with pytest.raises(MCPError) as refused:
                    await call_progress(session, Progress(), resumption_token=down.tokens[1])
            async with httpx.AsyncClient() as http:
                failures = (await http.get(f"{url}/test/store-failures")).json()
    finally:
        if service_up is not None:
            service_up.__exit__(None, None, None)
    assert [text_of(r) for r in (before, during, after)] == [
        "counted to 2",
        "counted to 3",
        "counted to 2",
    ]
    assert down.steps == [1, 2, 3]
    assert (refused.value.code, refused.value.data["reason"]) == (RESUME_REFUSED, "not_stored")
    assert failures.get("unreachable", 0) >= 1
    assert sum(failures.values()) == len(down.tokens)


async def test_a_resume_from_the_result_ends_at_once_with_nothing(deployment: Deployment) -> None:
    """Issue 20.2: a client that lost the connection right after the result reconnects with
    the result's id. It has everything: the answer is an empty, closed SSE response (before,
    the SDK registered a stream no message would ever reach, and it stayed open for good)."""
    progress = Progress()
    async with mcp_client(deployment.mcp, end_session=False) as (session, session_ids, _):
        await call_progress(session, progress, n=2, tag="ended")
    headers = {
        "mcp-session-id": session_ids[0],
        "mcp-protocol-version": "2025-11-25",
        "last-event-id": progress.tokens[-1],  # the result's id
        "accept": "text/event-stream",
    }
    with anyio.fail_after(10):
        async with (
            httpx.AsyncClient() as http,
            http.stream("GET", f"{deployment.mcp}/mcp", headers=headers) as response,
        ):
            body = await response.aread()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert b"data:" not in body
