"""The store in front of a misbehaving service: sent unstored, counted, and the session goes on.

Real processes: the hostile fake service (`tests.support.hostile_service`), the test MCP
server with the store pointed at it (its writer key picks the misbehaviour), and the SDK's
client. The `ws-…` keys accept the store's append channel and then answer its frames
with garbage, nothing, or a closed channel. None of them may raise out of `store_event`
(the SDK would answer 500 and end the session), hold the session past the store's
deadline, or grow the MCP server without bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import mcp_types as types
import pytest

from tests.support.hostile_service import hostile_service
from tests.support.processes import mcp_server
from tests.support.sdk_session import Progress, call_progress, mcp_client, text_of

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The hostile fake service; yields its URL."""
    with hostile_service(tmp_path_factory.mktemp("hostile-store")) as url:
        yield url


async def _session(
    hostile: str, workdir: Path, key: str, tag: str, *args: str, failures_behind: bool = False
) -> tuple[types.CallToolResult, types.CallToolResult, Progress, dict[str, int]]:
    """A session of two calls (`tag`: counted to 3, then to 1) with the test MCP server,
    its store pointed at `hostile` with writer key `key` (a 2 s store timeout, `args`
    added): both results, the first call's progress, and the failures the store counted
    (with `failures_behind`, waited for: they come behind the calls)."""
    argv = ("--key", key, "--store-timeout", "2", *args)
    with mcp_server(hostile, workdir, *argv) as url, anyio.fail_after(60):
        async with mcp_client(url) as (session, _, _):
            progress = Progress()
            first = await call_progress(session, progress, n=3, tag=tag)
            second = await call_progress(session, Progress(), n=1, tag=f"{tag}-2")
        async with httpx.AsyncClient() as http:
            failures: dict[str, int] = (await http.get(f"{url}/test/store-failures")).json()
            while failures_behind and not failures:  # within store_timeout
                await anyio.sleep(0.2)
                failures = (await http.get(f"{url}/test/store-failures")).json()
    return first, second, progress, failures


HOSTILE = pytest.mark.parametrize(
    ("key", "cause"),
    [
        ("html", "unexpected_content_type"),
        ("missing-fields", "malformed_response"),
        ("not-json", "malformed_response"),
        ("redirect", "redirected"),
        ("huge", "response_too_large"),
        ("gzip-bomb", "response_too_large"),
        ("drip", "timeout"),
        # The append channel accepted, then misbehaving.
        ("ws-garbage", "malformed_response"),
        ("ws-binary", "malformed_response"),
        ("ws-wrong-id", "malformed_response"),
        ("ws-missing-fields", "malformed_response"),
        ("ws-silent", "timeout"),
        ("ws-close", "unreachable"),
        # Closed at the announced size (1009): a timeout, or unreachable when the closing
        # handshake completes first (as the client's own test_hostile_service.py's ws-huge).
        ("ws-huge", "timeout|unreachable"),
    ],
)


@HOSTILE
async def test_a_session_goes_on_whatever_the_service_answers(
    hostile: str, tmp_path: Path, key: str, cause: str
) -> None:
    # Per event: what this test holds is that mode's promise (an id is a stored event).
    first, second, progress, failures = await _session(
        hostile, tmp_path, key, f"hostile-{key}", "--durability", "per_event"
    )
    assert (text_of(first), text_of(second)) == ("counted to 3", "counted to 1")
    assert progress.steps == [1, 2, 3]
    # Every message went out with a placeholder id: none claims to be stored.
    assert progress.tokens
    assert all(token.startswith("unstored:") for token in progress.tokens)
    causes = set(cause.split("|"))
    assert sum(failures.get(c, 0) for c in causes) >= 1, failures
    assert set(failures) <= causes | {"outage"}, failures


@HOSTILE
async def test_a_pipelined_session_goes_on_whatever_the_service_answers(
    hostile: str, tmp_path: Path, key: str, cause: str
) -> None:
    """Pipelined, messages are shown before the service answers; what it then does with
    their frames (garbage, silence, a closed channel) is counted, and the session goes on."""
    first, second, progress, failures = await _session(
        hostile, tmp_path, key, f"pipelined-{key}", failures_behind=True
    )
    assert (text_of(first), text_of(second)) == ("counted to 3", "counted to 1")
    assert progress.steps == [1, 2, 3]
    assert sum(failures.values()) >= 1, failures
