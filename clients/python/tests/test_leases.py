"""Writer leases through the client, against the real service as a process, on both databases.

`open_generation` declares the lease and the pipeline window; `renew_lease` renews one (REST
or a channel lease frame), `renew_leases` many (one frame over the channel, or one request
each over REST), each generation answered with its lease or its own refusal (`abandoned`
once the lease ran out).
"""

from __future__ import annotations

import asyncio

import pytest
from mcp_eventlog_client import EventLogClient, EventLogError, Lease, NewEvent
from mcp_eventlog_client.writer import AppendTransport

pytestmark = pytest.mark.process

# The service of the module (`base`) sweeps lapsed leases quickly.
SERVER_ENV = {"EVENTLOG_LEASE_SWEEP_SECONDS": "0.2"}


@pytest.mark.parametrize("transport", ["rest", "channel"])
async def test_a_generation_opens_with_its_lease_and_window_and_is_renewed(
    base: str, transport: AppendTransport
) -> None:
    async with EventLogClient(base, append_transport=transport) as log:
        opened = await log.open_generation(f"lease.open.{transport}", lease_seconds=5, pipeline=7)
        lease = await log.renew_lease(opened.token)
    assert (opened.lease_seconds, opened.pipeline, opened.abandoned) == (5, 7, False)
    assert opened.lease_expires_at is not None
    assert isinstance(lease, Lease)
    assert lease.generation == opened.token
    assert lease.lease_expires_at is not None
    assert lease.lease_expires_at >= opened.lease_expires_at
    assert log.fallbacks == {}


@pytest.mark.parametrize("transport", ["rest", "channel"])
async def test_many_leases_are_renewed_at_once_each_with_its_own_answer(
    base: str, transport: AppendTransport
) -> None:
    async with EventLogClient(base, append_transport=transport) as log:
        alive = [await log.open_generation(f"lease.many.{transport}.{i}") for i in range(3)]
        lapsing = await log.open_generation(f"lease.many.{transport}.lapsing", lease_seconds=1)
        await asyncio.sleep(1.6)  # its lease runs out; the sweep records it
        outcomes = await log.renew_leases([g.token for g in [*alive, lapsing]])
        with pytest.raises(EventLogError) as refused:
            await log.append(lapsing.token, [NewEvent("late")], first_seq=1)
    assert all(isinstance(outcomes[g.token], Lease) for g in alive)
    lost = outcomes[lapsing.token]
    assert isinstance(lost, EventLogError)
    assert (lost.status, lost.code) == (409, "abandoned")
    assert (refused.value.status, refused.value.code) == (409, "abandoned")
    assert log.fallbacks == {}
