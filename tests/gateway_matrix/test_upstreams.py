"""The matrix's own harness, with no gateway: each upstream serves the contract's tool to
each official client (progress 1..n, then the result), and none of them can resume.

This is what the gateway adds to: an upstream with no event store answers a
`Last-Event-ID` reconnect with nothing to replay, so a cut stream is lost there.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.ts_harness import CLIENTS, mcp_client
from tests.support.upstreams import UPSTREAMS, upstream

pytestmark = pytest.mark.process


@pytest.fixture(scope="module", params=UPSTREAMS)
def upstream_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One upstream process for the module, per upstream kind."""
    with upstream(request.param, tmp_path_factory.mktemp("upstream")) as url:
        yield url


@pytest.mark.parametrize("client", CLIENTS)
async def test_progress_then_result_direct(upstream_url: str, client: str) -> None:
    program = [{"op": "call", "arguments": {"n": 5}}]
    async with mcp_client(client, upstream_url, program) as run:
        lines = await run.finished()
    assert [line["progress"] for line in run.of(0, "progress")] == [1, 2, 3, 4, 5], lines
    (result,) = run.of(0, "result")
    assert result["text"] == "counted to 5"
