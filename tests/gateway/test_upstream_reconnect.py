"""An upstream that gives event ids and closes its stream before the response (SEP-1699
polling): the gateway reconnects to it with the upstream's last id and records on into
the same generation; the client sees one unbroken stream. The upstream is the Python
SDK's server with our own `EventLogEventStore` (`tests.support.mcp_server`), storing into
the gateway's own writer API."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.gateway.clients import Progress, call_progress, mcp_client, seqs_of, text_of
from tests.support.gateway import gateway_process_of
from tests.support.processes import free_port, mcp_server_process

pytestmark = pytest.mark.process


async def test_an_upstream_closing_its_stream_is_reconnected_with_its_last_id(
    gateway_database: str, tmp_path: Path
) -> None:
    gateway_port, upstream_port = free_port(), free_port()
    upstream = mcp_server_process(f"http://127.0.0.1:{gateway_port}", tmp_path, port=upstream_port)
    gateway = gateway_process_of(
        f"http://127.0.0.1:{upstream_port}/mcp", gateway_database, tmp_path, port=gateway_port
    )
    with gateway, upstream:
        progress = Progress()
        async with mcp_client(f"{gateway.base_url}/mcp") as (session, _, _):
            with anyio.fail_after(30):
                # `replay_after="done"`: the upstream replays only once its response is
                # stored, keeping the SDK's own replay/live window out of the test.
                result = await call_progress(
                    session, progress, n=6, close_at=3, tag="sep", replay_after="done"
                )
        assert text_of(result) == "counted to 6"
        assert progress.steps == [1, 2, 3, 4, 5, 6]
        ids = seqs_of(progress.tokens)
        # The gateway's own ids, one generation: priming, six steps, the result.
        assert ids == [(ids[0][0], seq) for seq in range(1, 9)]
        assert "upstream_lost" not in gateway.log()
