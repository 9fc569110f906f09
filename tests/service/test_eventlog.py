"""The writer API's use cases (app/service/eventlog.py), built from exactly the settings
slices they take: a generation's defaults and limits come from `StreamRules`, a batch's
and an event's from `BodyLimits`, the writer's lease from `LeaseSettings`."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from app.domain.append import EventBody
from app.domain.decision import TerminalPolicy
from app.errors import BatchTooLarge, EventTooLarge, InvalidRequest, ReservedEventType
from app.service.eventlog import EventLogService, WriteLimits
from app.settings.slices import LeaseSettings, StreamRules
from tests.support.services import default_bodies, opened_database, writer_service

RULES = StreamRules(
    terminal_resume=TerminalPolicy.RESET,
    default_max_events=7,
    max_events_limit=70,
    default_ttl_seconds=600,
    max_ttl_seconds=6_000,
)
LEASES = LeaseSettings(writer_lease_seconds=11, sweep_seconds=0, resume_catchup_ms=0)


@pytest.fixture
async def service(database_url: str) -> AsyncIterator[EventLogService]:
    limits = WriteLimits(RULES, default_bodies(max_batch_events=3, max_event_bytes=16), LEASES)
    async with opened_database(database_url) as database:
        yield writer_service(database, limits)


async def test_a_generation_takes_its_defaults_from_the_rules_and_the_lease_slice(
    service: EventLogService,
) -> None:
    gen = await service.open_generation("t", "s")
    assert (gen.max_events, gen.ttl_seconds, gen.lease_seconds) == (7, 600, 11)
    asked = await service.open_generation("t", "s", max_events=70, ttl_seconds=6_000)
    assert (asked.max_events, asked.ttl_seconds) == (70, 6_000)


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ({"max_events": 71}, "max_events is over the limit (70)"),
        ({"ttl_seconds": 6_001}, "ttl_seconds is over the limit (6000)"),
    ],
)
async def test_a_generation_over_the_rules_limits_is_refused(
    service: EventLogService, asked: dict[str, int], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=re.escape(message)):
        await service.open_generation("t", "s", **asked)


async def test_a_batch_is_held_to_the_body_limits(service: EventLogService) -> None:
    token = (await service.open_generation("t", "s")).token
    with pytest.raises(BatchTooLarge):
        await service.append("t", token, [EventBody("a")] * 4, first_seq=None, terminal=False)
    with pytest.raises(EventTooLarge):
        await service.append("t", token, [EventBody("x" * 17)], first_seq=None, terminal=False)
    control = [EventBody("x", event="reset")]
    with pytest.raises(ReservedEventType):
        await service.append("t", token, control, first_seq=None, terminal=False)
    at_the_limits = [EventBody("a"), EventBody("b"), EventBody("x" * 16)]
    stored = await service.append("t", token, at_the_limits, first_seq=None, terminal=False)
    assert (stored.first_seq, stored.count) == (1, 3)
