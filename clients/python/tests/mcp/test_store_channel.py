"""The store's append channel end to end: real processes (the service on both databases, the
test MCP server with `EventLogEventStore`, the official SDK client), and a relay process
between the MCP server and the service that a test cuts, or that passes no WebSocket.

The store appends over the channel by default; a channel cut under a streaming tool call
is resent and every message stored once, in order, the session never noticing; a proxy
that refuses the upgrade sends the appends over REST, counted, and nothing is lost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp_eventlog_client import EventLogClient

from tests.support.deployment import Deployment
from tests.support.processes import mcp_server
from tests.support.relay import relay_process
from tests.support.sdk_session import Progress, call_progress, mcp_client, text_of

pytestmark = pytest.mark.process


async def store_state(mcp: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The MCP server's store: how its appends travel, and its failed stores."""
    async with httpx.AsyncClient(base_url=mcp) as http:
        transport = (await http.get("/test/store-transport")).json()
        failures = (await http.get("/test/store-failures")).json()
    return transport, failures


def generation_and_seqs(tokens: list[str]) -> tuple[set[str], list[int]]:
    return {t.rsplit(":", 1)[0] for t in tokens}, [int(t.rsplit(":", 1)[1]) for t in tokens]


async def test_the_store_appends_over_the_channel_by_default(deployment: Deployment) -> None:
    progress = Progress()
    async with mcp_client(deployment.mcp) as (session, _, _):
        result = await call_progress(session, progress, n=5, tag="channel-default")
    transport, failures = await store_state(deployment.mcp)
    assert text_of(result) == "counted to 5"
    generations, seqs = generation_and_seqs(progress.tokens)
    assert len(generations) == 1
    assert seqs == list(range(1, 8))  # the priming event, the five notifications, the result
    assert transport["append_transport"] == "channel"
    assert transport["fallbacks"] == {}
    assert failures == {}


async def test_a_channel_cut_mid_stream_is_resent_and_stored_once_in_order(
    deployment: Deployment, tmp_path: Path
) -> None:
    steps = 200
    # Per event, each notification waits for its frame's answer, so the cuts at steps 40,
    # 100 and 160 each land on a channel with a frame in flight. (Pipelined, a burst of
    # notifications outruns its frames and a cut may find no channel open: the pipelined
    # store's cut channel is test_pipelined.py's flaky-channel test.)
    with (
        relay_process(deployment.eventlog, tmp_path) as relay,
        mcp_server(relay.url, tmp_path, "--durability", "per_event") as url,
    ):
        progress = Progress()
        results: list[Any] = []
        async with mcp_client(url) as (session, _, _):
            with anyio.fail_after(120):
                async with anyio.create_task_group() as tasks:

                    async def call() -> None:
                        results.append(
                            await call_progress(session, progress, n=steps, tag="channel-cut")
                        )

                    tasks.start_soon(call)
                    for at in (40, 100, 160):
                        await progress.at(at).wait()
                        await anyio.to_thread.run_sync(relay.cut)
        transport, failures = await store_state(url)
        cuts = relay.stats()["cut"]
    assert text_of(results[0]) == f"counted to {steps}"
    assert progress.steps == list(range(1, steps + 1))
    # Every message the client saw carries a stored id: one generation, no gap, no repeat.
    generations, seqs = generation_and_seqs(progress.tokens)
    assert len(generations) == 1
    assert seqs == list(range(1, steps + 3))
    assert failures == {}
    assert transport["fallbacks"] == {}
    assert cuts >= 3
    # The service holds each notification once, in the order it was sent.
    (token,) = generations
    async with EventLogClient(deployment.eventlog) as log:
        stored = [event async for event in log.events_after(token, 0)]
    progressed = [
        json.loads(e.data)["params"]["progress"] for e in stored if e.data and "progress" in e.data
    ]
    assert progressed == list(range(1, steps + 1))
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    print(f"{cuts} cuts; the store resent {transport['resent']} frame(s)")


async def test_a_proxy_that_refuses_the_upgrade_sends_the_stores_appends_over_rest(
    deployment: Deployment, tmp_path: Path
) -> None:
    with (
        relay_process(deployment.eventlog, tmp_path, refuse_upgrades=True) as relay,
        mcp_server(relay.url, tmp_path) as url,
    ):
        progress = Progress()
        async with mcp_client(url) as (session, _, _):
            result = await call_progress(session, progress, n=5, tag="channel-refused")
            second = await call_progress(session, Progress(), n=2, tag="channel-refused-2")
        transport, failures = await store_state(url)
        refused = relay.stats()["refused"]
    assert (text_of(result), text_of(second)) == ("counted to 5", "counted to 2")
    generations, seqs = generation_and_seqs(progress.tokens)
    assert len(generations) == 1
    assert seqs == list(range(1, 8))
    assert not any(t.startswith("unstored:") for t in progress.tokens)
    assert failures == {}
    assert transport["fallbacks"].get("upgrade_refused") == 1
    assert refused == 1
