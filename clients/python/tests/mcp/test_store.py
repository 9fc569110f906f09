"""`EventLogEventStore` against the in-process service, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from mcp.server.streamable_http import GET_STREAM_KEY, EventMessage
from mcp_eventlog_client import EventLogClient, NewEvent, RetryPolicy
from mcp_eventlog_client.mcp import RESUME_REFUSED, EventLogEventStore, session_scope
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCNotification, JSONRPCResponse

from app.settings import Settings
from tests.support.app import app_client, make_settings, started_app
from tests.support.transports import DropFirstResponse


def note(step: int) -> JSONRPCNotification:
    """A progress notification."""
    params = {"progressToken": 1, "progress": step}
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params=params)


def answer(request_id: int) -> JSONRPCResponse:
    """The response that ends a request's stream."""
    return JSONRPCResponse(jsonrpc="2.0", id=request_id, result={"ok": True})


class Sent:
    """A `send_callback` that keeps what the store sends."""

    def __init__(self) -> None:
        self.events: list[EventMessage] = []

    async def __call__(self, event: EventMessage) -> None:
        self.events.append(event)

    @property
    def refusal(self) -> JSONRPCError:
        """The one thing sent, which must be a refusal."""
        assert len(self.events) == 1
        (event,) = self.events
        assert event.event_id is None  # not a stored event: the client can not resume from it
        assert isinstance(event.message, JSONRPCError)
        assert event.message.error.code == RESUME_REFUSED
        return event.message


async def store_all(
    store: EventLogEventStore, stream: str, messages: list[JSONRPCMessage | None]
) -> list[str]:
    """Store messages in order; their event ids."""
    return [await store.store_event(stream, message) for message in messages]


def reason_of(error: JSONRPCError) -> tuple[str, str]:
    """The verdict and reason a refusal carries."""
    data = error.error.data
    assert isinstance(data, dict)
    return data["verdict"], data["reason"]


async def test_store_event_refuses_to_guess_the_session(client: httpx.AsyncClient) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client))
    with pytest.raises(RuntimeError, match="asgi_app"):
        await store.store_event("1", None)
    sent = Sent()
    assert await store.replay_events_after("t:1", sent) is None
    assert sent.events == []


async def test_replay_sends_exactly_the_missed_messages_across_pages(
    client: httpx.AsyncClient,
) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client), page_limit=2)
    with session_scope("A"):
        messages: list[JSONRPCMessage | None] = [None, *[note(n) for n in range(1, 6)], answer(7)]
        ids = await store_all(store, "7", messages)
        token = ids[0].rsplit(":", 1)[0]
        assert ids == [f"{token}:{seq}" for seq in range(1, 8)]
        sent = Sent()
        # The response was among them: nothing more can come, the SDK ends the response.
        assert await store.replay_events_after(ids[1], sent) is None
    assert [e.event_id for e in sent.events] == ids[2:]
    assert [e.message for e in sent.events] == messages[2:]


async def test_a_priming_event_is_stored_but_never_replayed(client: httpx.AsyncClient) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client))
    with session_scope("A"):
        first = await store.store_event("3", note(1))
        await store.store_event("3", None)  # the SDK primes a resumed connection mid-stream
        last = await store.store_event("3", note(2))
        sent = Sent()
        assert await store.replay_events_after(first, sent) == "3"
    assert [(e.event_id, e.message) for e in sent.events] == [(last, note(2))]


async def test_a_reused_request_id_opens_a_new_generation(client: httpx.AsyncClient) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client))
    with session_scope("A"):
        old = await store_all(store, "1", [None, note(1), answer(1)])
        new = await store_all(store, "1", [None, note(1)])
        assert old[0].split(":")[0] != new[0].split(":")[0]
        assert new[0].endswith(":1")
        sent = Sent()
        assert await store.replay_events_after(old[1], sent) is None
    assert reason_of(sent.refusal) == ("reset", "superseded")


async def test_a_token_of_another_session_replays_nothing(client: httpx.AsyncClient) -> None:
    resumes: list[str] = []

    async def count_resumes(request: httpx.Request) -> None:
        if request.url.path.endswith("/resume"):
            resumes.append(request.url.path)

    client.event_hooks["request"].append(count_resumes)
    store = EventLogEventStore(client=EventLogClient(http=client))
    with session_scope("A"):
        theirs = await store_all(store, "1", [None, note(1), note(2)])
    with session_scope("B"):
        await store_all(store, "1", [None, note(1)])
        sent = Sent()
        assert await store.replay_events_after(theirs[0], sent) is None
    assert reason_of(sent.refusal) == ("invalid", "cross_session")
    # Refused before the service was asked: no decision recorded, no event fetched.
    assert resumes == []
    with session_scope("A"):
        assert await store.replay_events_after(theirs[0], Sent()) == "1"
    assert resumes == [f"/v1/streams/{store.names.name('A', '1')}/resume"]


async def test_a_forgotten_token_is_checked_against_the_stream_the_service_names(
    client: httpx.AsyncClient,
) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client), max_streams=1)
    with session_scope("A"):
        theirs = await store_all(store, "1", [None, note(1)])
    with session_scope("B"):
        await store_all(store, "1", [None])  # pushes A's token out of the bounded map
        sent = Sent()
        assert await store.replay_events_after(theirs[0], sent) is None
    assert reason_of(sent.refusal) == ("invalid", "cross_session")
    with session_scope("A"):
        resumed = Sent()
        assert await store.replay_events_after(theirs[0], resumed) == "1"
    assert [e.message for e in resumed.events] == [note(1)]


@pytest.mark.parametrize(
    ("last_event_id", "reason"),
    [("no colon", "malformed_id"), ("Zm9vYmFyYmF6cXV4cXV1eA:1", "unknown_generation")],
)
async def test_an_id_the_service_does_not_know_is_refused(
    client: httpx.AsyncClient, last_event_id: str, reason: str
) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client))
    sent = Sent()
    with session_scope("A"):
        assert await store.replay_events_after(last_event_id, sent) is None
    assert reason_of(sent.refusal) == ("invalid", reason)
    # No request to name: no `id` member at all (the MCP schema's `id?`), never `null`,
    # which the TypeScript v2 client drops before reconnecting and waiting.
    (event,) = sent.events
    wire = json.loads(event.message.model_dump_json(by_alias=True, exclude_unset=True))
    assert "id" not in wire
    assert wire["error"]["data"]["reason"] == reason


async def test_a_refused_get_stream_replay_sends_nothing(client: httpx.AsyncClient) -> None:
    log = EventLogClient(http=client)
    store = EventLogEventStore(client=log)
    with session_scope("A"):
        ids = await store_all(store, GET_STREAM_KEY, [note(1), note(2)])
        await log.open_generation(store.names.name("A", GET_STREAM_KEY))
        sent = Sent()
        assert await store.replay_events_after(ids[0], sent) is None
    # No request waits on the standalone stream: there is nobody to fail.
    assert sent.events == []


async def test_a_fenced_generation_continues_in_a_new_one(client: httpx.AsyncClient) -> None:
    log = EventLogClient(http=client)
    store = EventLogEventStore(client=log, durability="per_event")
    with session_scope("A"):
        before = await store.store_event("5", note(1))
        fencer = await log.open_generation(store.names.name("A", "5"))
        after = await store.store_event("5", note(2))
    token = after.split(":")[0]
    assert token not in (before.split(":")[0], fencer.token)
    assert after.endswith(":1")


async def test_an_append_whose_answer_was_lost_is_stored_once(settings: Settings) -> None:
    async with started_app(settings) as (app, _client):
        dropping = DropFirstResponse(httpx.ASGITransport(app=app), "POST", "/events")
        http = httpx.AsyncClient(transport=dropping, base_url="http://eventlog.test")
        log = EventLogClient(http=http, retry=RetryPolicy(base_delay=0.001))
        store = EventLogEventStore(client=log)
        with session_scope("A"):
            event_id = await store.store_event("1", note(1))
            second = await store.store_event("1", note(2))
        token = event_id.split(":")[0]
        await store.settle(token)
        assert (event_id, second) == (f"{token}:1", f"{token}:2")
        assert dropping.dropped == 1
        page = await log.page(token)
        assert [e.seq for e in page.events] == [1, 2]


async def test_a_stream_not_written_by_the_store_is_not_replayed(
    client: httpx.AsyncClient,
) -> None:
    log = EventLogClient(http=client)
    other = await log.open_generation("sess-1.req-7")
    await log.append(other.token, [NewEvent(note(1).model_dump_json())], first_seq=1)
    store = EventLogEventStore(client=log)
    sent = Sent()
    with session_scope("A"):
        assert await store.replay_events_after(f"{other.token}:0", sent) is None
    assert reason_of(sent.refusal) == ("invalid", "cross_session")


async def test_an_unreachable_service_fails_the_replay_visibly() -> None:
    log = EventLogClient("http://127.0.0.1:1", retry=RetryPolicy(attempts=1))
    store = EventLogEventStore(client=log)
    sent = Sent()
    with session_scope("A"):
        assert await store.replay_events_after("t:1", sent) is None
    assert reason_of(sent.refusal) == ("unavailable", "unreachable")
    await log.aclose()


def big_result(request_id: int, mib: float) -> JSONRPCResponse:
    """A tool result of about `mib` MiB of text (non-ASCII included, to cut UTF-8 safely)."""
    text = ("report line ✓ " * 64 + "\n") * int(mib * 1024 * 1024 / 1040)
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)


async def test_a_finished_stream_resumes_as_often_as_asked(client: httpx.AsyncClient) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client))
    with session_scope("A"):
        messages: list[JSONRPCMessage | None] = [None, note(1), note(2), answer(7)]
        ids = await store_all(store, "7", messages)
        for _ in range(3):
            sent = Sent()
            # Ended after the response (None): the SDK registers nothing, primes nothing.
            assert await store.replay_events_after(ids[1], sent) is None
            assert [(e.event_id, e.message) for e in sent.events] == list(
                zip(ids[2:], messages[2:], strict=True)
            )
        # Nothing was opened: the stream's one generation still resumes.
        answer_ = await store.client.resume(ids[1])
        assert (answer_.generation, len(answer_.events)) == (ids[1].split(":")[0], 2)


async def test_a_resume_from_the_response_ends_at_once_with_nothing(
    client: httpx.AsyncClient,
) -> None:
    """Issue 20.2: a client that lost the connection right after the result reconnects with
    the result's id; before, the SDK registered a stream no message would ever reach."""
    store = EventLogEventStore(client=EventLogClient(http=client))
    with session_scope("A"):
        ids = await store_all(store, "7", [None, note(1), answer(7)])
        sent = Sent()
        assert await store.replay_events_after(ids[-1], sent) is None
    assert sent.events == []


async def test_a_stream_still_being_written_is_registered_and_primed(
    client: httpx.AsyncClient,
) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client))
    with session_scope("A"):
        ids = await store_all(store, "7", [None, note(1), note(2)])
        for claim in (ids[1], ids[-1]):
            sent = Sent()
            assert await store.replay_events_after(claim, sent) == "7"
            # The SDK primes the resumed connection right after the replay, in its task:
            # the client is then at the last id it was sent, and nothing new is opened.
            assert await store.store_event("7", None) == ids[-1]


async def test_a_priming_event_of_another_stream_after_a_replay_is_stored(
    client: httpx.AsyncClient,
) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client))
    with session_scope("A"):
        ids = await store_all(store, "7", [None, note(1)])
        assert await store.replay_events_after(ids[0], Sent()) == "7"
        primed = await store.store_event("8", None)
    assert primed.split(":")[0] != ids[0].split(":")[0]


@pytest.mark.parametrize(("stream", "request_id"), [("7", 7), ("req-a", "req-a"), ("007", "007")])
async def test_a_refusal_carries_the_request_id(
    client: httpx.AsyncClient, stream: str, request_id: int | str
) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client))
    with session_scope("A"):
        old = await store_all(store, stream, [None, note(1), answer(7)])
        await store_all(store, stream, [None])  # the request id reused: a new generation
        sent = Sent()
        assert await store.replay_events_after(old[1], sent) is None
    assert reason_of(sent.refusal) == ("reset", "superseded")
    assert sent.refusal.id == request_id
    wire = sent.refusal.model_dump(by_alias=True)
    assert wire["id"] == request_id


async def test_a_refusal_of_another_sessions_token_names_its_request(
    client: httpx.AsyncClient,
) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client))
    with session_scope("A"):
        theirs = await store_all(store, "3", [None, note(1)])
    with session_scope("B"):
        sent = Sent()
        assert await store.replay_events_after(theirs[0], sent) is None
    assert (reason_of(sent.refusal), sent.refusal.id) == (("invalid", "cross_session"), 3)


async def test_a_multi_mib_result_is_stored_in_parts_and_replayed_whole(
    client: httpx.AsyncClient,
) -> None:
    log = EventLogClient(http=client)
    store = EventLogEventStore(client=log, page_limit=2)
    result = big_result(9, mib=5.5)
    with session_scope("A"):
        ids = await store_all(store, "9", [None, note(1), result])
        sent = Sent()
        assert await store.replay_events_after(ids[1], sent) is None  # the result was sent
    assert [(e.event_id, e.message) for e in sent.events] == [(ids[2], result)]
    assert store.failed_stores == 0
    token, _, last = ids[2].rpartition(":")
    stored = [e async for e in log.events_after(token, 0)]
    parts = [e for e in stored if e.event and e.event.startswith("message-part")]
    assert len(parts) == int(last) - 2 >= 6
    assert all(len(e.data.encode()) <= 1024 * 1024 for e in parts)
    assert parts[0].event == f"message-part 1/{len(parts)}"


async def test_a_replay_never_starts_inside_a_split_message(client: httpx.AsyncClient) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client), max_event_bytes=1000)
    with session_scope("A"):
        ids = await store_all(store, "4", [None, big_result(4, mib=0.01)])
        token = ids[0].split(":")[0]
        sent = Sent()
        assert await store.replay_events_after(f"{token}:2", sent) is None
    assert (reason_of(sent.refusal), sent.refusal.id) == (("invalid", "mid_message"), 4)


async def test_a_refused_append_is_sent_live_counted_and_never_resumed(
    database_url: str,
) -> None:
    async with app_client(make_settings(database_url, max_event_bytes=4096)) as http:
        log = EventLogClient(http=http)
        store = EventLogEventStore(client=log, durability="per_event")
        with session_scope("A"):
            first = await store_all(store, "5", [None, note(1)])
            failed = await store.store_event("5", big_result(5, mib=0.01))
            assert failed.startswith("unstored:")  # a placeholder, never a resumable id
            assert (store.failed_stores, store.failures["event_too_large"]) == (1, 1)
            after = await store.store_event("6", note(1))  # the session goes on
            assert after.endswith(":1")
            for token in (first[0], first[1], failed):
                sent = Sent()
                assert await store.replay_events_after(token, sent) is None
                assert reason_of(sent.refusal) == ("reset", "not_stored")
                assert sent.refusal.id == 5


class Outage(httpx.AsyncBaseTransport):
    """The service as a transport that can be cut off (connection refused) and restored."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.down = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        return await self.inner.handle_async_request(request)


async def test_an_unreachable_service_never_takes_the_session_down(settings: Settings) -> None:
    async with started_app(settings) as (app, _client):
        outage = Outage(httpx.ASGITransport(app=app))
        http = httpx.AsyncClient(transport=outage, base_url="http://eventlog.test")
        log = EventLogClient(http=http, retry=RetryPolicy(attempts=2, base_delay=0.001))
        store = EventLogEventStore(client=log, outage_seconds=0.0, durability="per_event")
        with session_scope("A"):
            before = await store_all(store, "1", [None, note(1)])
            outage.down = True
            lost = await store.store_event("1", note(2))
            unopened = await store.store_event("2", None)
            assert store.failures == {"unreachable": 2}
            assert lost.startswith("unstored:")
            assert unopened.startswith("unstored:")
            outage.down = False
            later = await store.store_event("1", note(3))
            assert later.split(":")[0] != before[0].split(":")[0]
            for token in (before[1], lost, unopened):
                sent = Sent()
                assert await store.replay_events_after(token, sent) is None
                assert reason_of(sent.refusal) == ("reset", "not_stored")
            resumed = Sent()
            assert await store.replay_events_after(later, resumed) == "1"
            assert resumed.events == []
        # A store that never saw the failure: the service itself refuses the old token.
        fresh = EventLogEventStore(client=log)
        with session_scope("A"):
            sent = Sent()
            assert await fresh.replay_events_after(before[1], sent) is None
        assert reason_of(sent.refusal) == ("reset", "superseded")


async def test_pipelined_a_fenced_generation_loses_its_unstored_tail_visibly(
    client: httpx.AsyncClient,
) -> None:
    log = EventLogClient(http=client)
    store = EventLogEventStore(client=log)
    with session_scope("A"):
        stored = await store_all(store, "5", [None, note(1)])
        token = stored[0].split(":")[0]
        await store.settle(token)
        await log.open_generation(store.names.name("A", "5"))  # another writer fences it
        shown = await store.store_event("5", note(2))  # shown, then refused behind
        await store.settle(token)
        after = await store.store_event("5", note(3))
        for claim in (stored[1], shown):
            sent = Sent()
            assert await store.replay_events_after(claim, sent) is None
            assert reason_of(sent.refusal) == ("reset", "not_stored")
    assert shown == f"{token}:3"
    assert store.failures == {"superseded": 1}
    assert after.split(":")[0] != token
    assert after.endswith(":1")
    # A process that never saw the break: the service answers a reset too.
    fresh = EventLogEventStore(client=log)
    with session_scope("A"):
        sent = Sent()
        assert await fresh.replay_events_after(shown, sent) is None
    assert reason_of(sent.refusal)[0] == "reset"


class SlowAppends(httpx.AsyncBaseTransport):
    """The service as a transport whose appends take `delay` seconds to be answered."""

    def __init__(self, inner: httpx.AsyncBaseTransport, delay: float) -> None:
        self.inner = inner
        self.delay = delay

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/events"):
            await anyio.sleep(self.delay)
        return await self.inner.handle_async_request(request)


async def test_pipelined_store_event_returns_before_the_commit_and_a_replay_waits_for_it(
    settings: Settings,
) -> None:
    async with started_app(settings) as (app, _client):
        slow = SlowAppends(httpx.ASGITransport(app=app), delay=0.3)
        http = httpx.AsyncClient(transport=slow, base_url="http://eventlog.test")
        log = EventLogClient(http=http)
        store = EventLogEventStore(client=log)
        with session_scope("A"):
            ids = await store_all(store, "8", [None])
            token = ids[0].split(":")[0]
            await store.settle(token)  # the claim below is stored; what follows is not yet
            started = anyio.current_time()
            ids += await store_all(store, "8", [note(n) for n in range(1, 41)])
            handed = anyio.current_time() - started
            # The replay in this process waits for what was handed out, then sends it all.
            sent = Sent()
            assert await store.replay_events_after(ids[0], sent) == "8"
    assert handed < 0.3  # 40 messages handed out before one append was answered
    assert ids == [f"{token}:{seq}" for seq in range(1, 42)]
    assert [e.event_id for e in sent.events] == ids[1:]


async def test_after_an_outage_stores_fail_fast_for_a_while(client: httpx.AsyncClient) -> None:
    log = EventLogClient("http://127.0.0.1:1", retry=RetryPolicy(attempts=1))
    store = EventLogEventStore(client=log, outage_seconds=60.0)
    with session_scope("A"):
        await store.store_event("1", note(1))
        await store.store_event("1", note(2))
    assert store.failures == {"unreachable": 1, "outage": 1}
    await log.aclose()


async def test_a_message_over_the_stores_limit_is_sent_live_and_never_resumed(
    client: httpx.AsyncClient,
) -> None:
    store = EventLogEventStore(client=EventLogClient(http=client), max_message_bytes=10_000)
    with session_scope("A"):
        first = await store.store_event("3", note(1))
        await store.store_event("3", big_result(3, mib=0.02))
        sent = Sent()
        assert await store.replay_events_after(first, sent) is None
    assert store.failures == {"message_too_large": 1}
    assert reason_of(sent.refusal) == ("reset", "not_stored")
