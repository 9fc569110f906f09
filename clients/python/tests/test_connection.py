"""What the client retries, and proof that a retry never stores anything twice."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from mcp_eventlog_client import (
    DatabaseUnavailable,
    EventLogClient,
    EventLogError,
    NewEvent,
    RetryPolicy,
    ServiceClient,
    ServiceConnection,
    ServiceUnreachable,
    Superseded,
    TaskClient,
    error_for,
)

from app.settings import Settings
from tests.support.app import started_app
from tests.support.transports import AnswerFirst, DropFirstResponse

FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.01)


@pytest.fixture
async def service(settings: Settings) -> AsyncIterator[httpx.ASGITransport]:
    """The in-process app (lifespan started) as a transport to wrap."""
    async with started_app(settings) as (app, _client):
        yield httpx.ASGITransport(app=app)


def client_over(transport: httpx.AsyncBaseTransport) -> EventLogClient:
    http = httpx.AsyncClient(transport=transport, base_url="http://eventlog.test")
    return EventLogClient(http=http, retry=FAST)


async def test_a_retried_append_with_first_seq_is_stored_once(
    service: httpx.ASGITransport,
) -> None:
    dropping = DropFirstResponse(service, "POST", "/events")
    log = client_over(dropping)
    gen = await log.open_generation("s.retry")
    result = await log.append(gen.token, [NewEvent("a"), NewEvent("b")], first_seq=1)
    assert (dropping.dropped, dropping.sent) == (1, 2)
    assert result.duplicate is True
    assert result.event_ids == (f"{gen.token}:1", f"{gen.token}:2")
    page = await log.page(gen.token)
    assert [e.data for e in page.events] == ["a", "b"]


async def test_an_append_without_first_seq_is_not_retried(service: httpx.ASGITransport) -> None:
    dropping = DropFirstResponse(service, "POST", "/events")
    log = client_over(dropping)
    gen = await log.open_generation("s.no-retry")
    with pytest.raises(ServiceUnreachable) as lost:
        await log.append(gen.token, [NewEvent("a")])
    assert (lost.value.status, dropping.sent) == (0, 1)
    assert isinstance(lost.value.__cause__, httpx.ReadTimeout)
    assert [e.data for e in (await log.page(gen.token)).events] == ["a"]


async def test_opening_a_generation_is_never_retried(service: httpx.ASGITransport) -> None:
    dropping = DropFirstResponse(service, "POST", "/generations")
    log = client_over(dropping)
    with pytest.raises(ServiceUnreachable):
        await log.open_generation("s.open-once")
    assert dropping.sent == 1
    assert (await log.stream("s.open-once")).generations == 1


async def test_database_unavailable_is_retried_then_raised(service: httpx.ASGITransport) -> None:
    problem = {"code": "database_unavailable", "detail": "locked", "status": 503}
    busy = httpx.Response(503, json=problem, headers={"Retry-After": "0"})
    recovering = AnswerFirst(service, busy, count=FAST.attempts - 1)
    log = client_over(recovering)
    answer = await log.resume("t:1")
    assert answer.reason == "unknown_generation"
    assert len(recovering.headers) == FAST.attempts

    log = client_over(AnswerFirst(service, busy, count=FAST.attempts))
    with pytest.raises(DatabaseUnavailable) as unavailable:
        await log.resume("t:1")
    assert (unavailable.value.status, unavailable.value.detail) == (503, "locked")


async def test_a_refusal_is_not_retried(service: httpx.ASGITransport) -> None:
    counting = AnswerFirst(service, httpx.Response(500), count=0)
    log = client_over(counting)
    old = await log.open_generation("s.fenced")
    await log.open_generation("s.fenced")
    before = len(counting.headers)
    with pytest.raises(Superseded):
        await log.append(old.token, [NewEvent("x")], first_seq=1)
    assert len(counting.headers) == before + 1


async def test_key_and_url_come_from_the_environment(
    service: httpx.ASGITransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTLOG_URL", "http://eventlog.test")
    monkeypatch.setenv("EVENTLOG_KEY", "s3cret")
    recording = AnswerFirst(service, httpx.Response(500), count=0)
    log = EventLogClient(http=httpx.AsyncClient(transport=recording), retry=FAST)
    assert log.connection.base_url == "http://eventlog.test"
    await log.resume("t:1")
    assert recording.headers[-1]["authorization"] == "Bearer s3cret"
    explicit = EventLogClient("http://other.test/", key="")
    assert explicit.connection.base_url == "http://other.test"
    await explicit.aclose()


class ClosingTransport(httpx.AsyncBaseTransport):
    """A transport that only records that it was closed."""

    closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request is sent")

    async def aclose(self) -> None:
        self.closed = True


async def test_both_clients_take_the_connection_options_and_own_what_they_build() -> None:
    for kind in (EventLogClient, TaskClient):
        transport = ClosingTransport()
        client = kind("http://one.test/", key="k", transport=transport, timeout=2.5, retry=FAST)
        assert isinstance(client, ServiceClient)
        connection = client.connection
        assert (connection.base_url, connection.headers) == (
            "http://one.test",
            {"Authorization": "Bearer k"},
        )
        assert (connection.timeout, connection.retry) == (2.5, FAST)
        await client.aclose()
        assert transport.closed, kind
    # A given connection is shared: either client leaves it open for its owner.
    shared = ClosingTransport()
    log = EventLogClient("http://one.test", transport=shared)
    tasks = TaskClient(connection=log.connection)
    assert tasks.connection is log.connection
    await tasks.aclose()
    assert not shared.closed
    await log.aclose()
    assert shared.closed
    owned = ServiceConnection("http://two.test", transport=(mine := ClosingTransport()))
    borrower = EventLogClient(connection=owned)
    await borrower.aclose()
    assert not mine.closed
    await owned.aclose()
    assert mine.closed


def test_known_codes_map_to_their_class() -> None:
    known = error_for(409, "superseded", "fenced")
    assert isinstance(known, Superseded)
    assert known.code == "superseded"


async def test_a_non_problem_error_keeps_its_status(service: httpx.ASGITransport) -> None:
    gateway = httpx.Response(404, text="<html>no</html>")
    log = client_over(AnswerFirst(service, gateway, count=1))
    with pytest.raises(EventLogError) as refused:
        await log.stream("anything")
    assert (refused.value.status, refused.value.code) == (404, "http_error")
