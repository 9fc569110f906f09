"""The standalone GET stream's normal reconnect is not a reset in the audit: a client
that held every message of its ended standalone stream and reconnects with its last id
gets a fresh stream, and operators see no `reset`/`terminal` decision for it (the decision
log, `eventlog_resume_verdicts_total`), only the gateway's own count
`eventlog_gateway_resumes_total{verdict="resume",reason="standalone"}`. A claim that does
miss something is audited as the table decides it.

Real processes: the Python SDK upstream, the gateway (SQLite, PostgreSQL), raw HTTP.
"""

from __future__ import annotations

import re

import httpx
import pytest

from tests.gateway.conftest import Pair
from tests.gateway.test_endpoint import _first_id, _initialized, admin
from tests.support.waiting import until

pytestmark = pytest.mark.process


def counted(metrics: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    found = re.search(rf"^{name}\{{{re.escape(wanted)}\}} (\S+)$", metrics, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def terminal(pair: Pair, event_id: str) -> bool:
    generation = await admin(pair, f"/generations/{event_id.rsplit(':', 1)[0]}")
    return isinstance(generation, dict) and bool(generation["terminal"])


async def test_a_standalone_reconnect_that_misses_nothing_is_not_a_reset_decision(
    pair: Pair,
) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        metrics = lambda: http.get(f"{pair.gateway.base_url}/metrics")  # noqa: E731
        before = (await metrics()).text
        headers = await _initialized(http, pair)
        first = await _first_id(http, pair, headers)
        await until(lambda: terminal(pair, first))  # the client left: that stream ended
        # The normal reconnect: the client holds the stream's last (terminal) message.
        second = await _first_id(http, pair, {**headers, "last-event-id": first})
        await until(lambda: terminal(pair, second))
        # A claim of the first stream now misses what the second one carried: a real
        # reset (superseded), audited. The audit is written in order, so once it is in
        # the log, a decision for the normal reconnect would be there before it.
        await _first_id(http, pair, {**headers, "last-event-id": first})
        generation = await admin(pair, f"/generations/{first.rsplit(':', 1)[0]}")
        assert isinstance(generation, dict)
        stream_id = generation["stream_id"]

        async def decisions() -> list[dict[str, object]]:
            found = await admin(pair, f"/decisions?stream_id={stream_id}")
            assert isinstance(found, dict)
            return list(found["decisions"])

        async def audited() -> bool:
            return bool(await decisions())

        await until(audited)
        decided = await decisions()
        after = (await metrics()).text
    assert [(d["verdict"], d["reason"]) for d in decided] == [("reset", "superseded")]
    resumes = "eventlog_gateway_resumes_total"
    verdicts = "eventlog_resume_verdicts_total"
    assert (
        counted(after, resumes, verdict="resume", reason="standalone")
        - counted(before, resumes, verdict="resume", reason="standalone")
        == 1
    )
    for name in (resumes, verdicts):
        assert counted(after, name, verdict="reset", reason="terminal") == counted(
            before, name, verdict="reset", reason="terminal"
        ), name
