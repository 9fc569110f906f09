"""The relay's backlog: messages held in memory up to the bound, read back from the log for
a client that falls behind — the same bytes either way — and the cases the log cannot
serve (an unstored message past the bound, events evicted before they were read back).
Against the real service on both databases, with the real recorder."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import pytest

from app import bootstrap
from app.bootstrap import Container
from app.domain.append import EventBody
from app.errors import StorageUnavailable
from app.gateway import messages, relay
from app.gateway.recorder import Recorder
from app.gateway.relay import Backlog, RelayCut, Relayed
from app.gateway.sse import SseEvent, SseParser
from app.settings import Settings

MAX_EVENT_BYTES = 100  # messages over it are stored in parts


@pytest.fixture
async def container(settings: Settings) -> AsyncIterator[Container]:
    built = bootstrap.build(settings.model_copy(update={"default_max_events": 40}))
    try:
        yield built
    finally:
        await built.close()


class Call:
    """One recorded response: the recorder and a backlog fed as the recording feeds it."""

    def __init__(self, container: Container, limit: int) -> None:
        self.recorder = Recorder(
            container.eventlog,
            tenant="default",
            stream_id="mcp.Zq3xVb9-_fKp2LmN8rTw1A.7",
            producer="test",
            max_batch_events=100,
            on_unstored=lambda _count, _why: None,
            on_stored=lambda _count: None,
        )
        self.backlog = Backlog(
            container.reads, tenant="default", limit=limit, page_events=7, page_bytes=200
        )

    def prime(self) -> None:
        bodies = [messages.priming_body()]
        self.backlog.put(Relayed(self.recorder.submit(bodies), "", 1))

    def send(self, data: str, *, terminal: bool = False) -> None:
        bodies = messages.bodies_of(data, MAX_EVENT_BYTES)
        stored = self.recorder.submit(bodies, terminal=terminal)
        self.backlog.put(Relayed(stored, data, len(bodies)))

    async def received(self) -> tuple[list[SseEvent], RelayCut | None]:
        """Once everything sent is stored (or given up): what the client is sent."""
        await self.recorder.drain()
        self.backlog.end()
        body: list[bytes] = []
        try:
            async for chunk in self.backlog.bodies():
                body.append(chunk)
        except RelayCut as cut:
            return _events(body), cut
        return _events(body), None


def _events(body: Sequence[bytes]) -> list[SseEvent]:
    return SseParser(10_000).feed(b"".join(body).decode())


def _message(n: int) -> str:
    """A message of about 65 characters; every third one is stored in two parts."""
    pad = "é" * 40 if n % 3 == 0 else ""
    note = {"jsonrpc": "2.0", "method": "note", "params": {"n": n, "pad": pad}}
    return json.dumps(note, ensure_ascii=False)


def _plain(n: int) -> str:
    """A message of 50 characters, stored as one event."""
    return f'{{"jsonrpc":"2.0","method":"note","params":{{"n":{n:5}}}}}'


class Failing:
    """The service's append, refusing while `fail` is set (the log away)."""

    def __init__(self, container: Container) -> None:
        self.real = container.eventlog.append
        self.fail = False

    async def append(self, tenant: str, token: str, batch: Sequence[EventBody], **kw: Any) -> Any:
        if self.fail:
            raise StorageUnavailable("the database is down (a test says so)")
        return await self.real(tenant, token, batch, **kw)


async def test_a_client_behind_is_sent_from_the_log_exactly_what_memory_would_send(
    container: Container,
) -> None:
    sent = [_message(n) for n in range(1, 13)]
    received = []
    for limit in (1_000_000, 100):  # all in memory; behind after the first message
        call = Call(container, limit)
        call.prime()
        for data in sent:
            call.send(data)
        call.send('{"jsonrpc":"2.0","id":7,"result":{}}', terminal=True)
        events, cut = await call.received()
        assert cut is None
        received.append(events)
    in_memory, read_back = received
    assert [e.data for e in read_back] == [e.data for e in in_memory]
    assert [e.data for e in read_back][1:-1] == sent
    # The log's ids, each message's its last part's: the same seqs on both paths.
    seqs = [[int((e.id or "").rsplit(":", 1)[1]) for e in events] for events in received]
    assert seqs[0] == seqs[1]
    assert seqs[0] == sorted(set(seqs[0]))


async def test_once_caught_up_the_next_messages_are_held_in_memory_again(
    container: Container,
) -> None:
    call = Call(container, 150)
    for n in range(1, 6):
        call.send(_message(n))
    await call.recorder.drain()
    assert call.backlog.behind
    bodies = call.backlog.bodies()
    read = b""
    while read.count(b"\n\n") < 5:
        read += await anext(bodies)
    call.send(_message(6))  # put after everything was sent: held, not read back
    assert not call.backlog.behind
    call.send('{"jsonrpc":"2.0","id":7,"result":{}}', terminal=True)
    await call.recorder.drain()
    call.backlog.end()
    rest = b"".join([chunk async for chunk in bodies])
    events = _events([read, rest])
    assert [e.data for e in events][:6] == [_message(n) for n in range(1, 7)]


async def behind_with_nothing_held(
    call: Call, count: int
) -> tuple[list[SseEvent], AsyncGenerator[bytes]]:
    """`count` plain messages put and stored, the client sent those held in memory (what
    it got, and the rest of its stream): the rest waits in the log (the limit is 120: two
    are held, then the client is behind)."""
    for n in range(1, count + 1):
        call.send(_plain(n))
    await call.recorder.drain()
    assert call.backlog.behind
    bodies = call.backlog.bodies()
    held = await anext(bodies)
    assert held.count(b"\n\n") == 2
    assert call.backlog.held == 0
    assert call.backlog.behind
    return _events([held]), bodies


async def test_unstored_messages_of_a_client_behind_are_kept_within_the_bound(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log away while the client is behind: the messages it could not store go out in
    their place without an id (as many as the bound holds), then the messages stored in
    the next generation."""
    failing = Failing(container)
    monkeypatch.setattr(container.eventlog, "append", failing.append)
    call = Call(container, 120)
    first, bodies = await behind_with_nothing_held(call, 8)
    failing.fail = True
    for n in (9, 10):  # 100 characters: within the bound
        call.send(_plain(n))
        await call.recorder.drain()
    failing.fail = False
    call.send(_plain(11))
    call.send('{"jsonrpc":"2.0","id":7,"result":{}}', terminal=True)
    await call.recorder.drain()
    call.backlog.end()
    events = first + _events([chunk async for chunk in bodies])  # no cut: it reads to the end
    assert [e.data for e in events][:-1] == [_plain(n) for n in range(1, 12)]
    ids = [e.id for e in events]
    assert ids[8:10] == [None, None]  # unstored: no id, in their place
    spoiled, fresh = (ids[0] or "").rsplit(":", 1)[0], (ids[10] or "").rsplit(":", 1)[0]
    assert fresh != spoiled  # stored on in a new generation (the spoiled one fenced)
    assert ids[:8] == [f"{spoiled}:{seq}" for seq in range(1, 9)]


async def test_an_unstored_message_past_the_bound_cuts_the_stream_at_its_place(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = Failing(container)
    monkeypatch.setattr(container.eventlog, "append", failing.append)
    call = Call(container, 120)
    _first, bodies = await behind_with_nothing_held(call, 8)
    failing.fail = True
    for n in (9, 10, 11):  # 150 characters: the third does not fit
        call.send(_plain(n))
        await call.recorder.drain()
    failing.fail = False
    call.send('{"jsonrpc":"2.0","id":7,"result":{}}', terminal=True)
    await call.recorder.drain()
    call.backlog.end()
    read: list[bytes] = []

    async def read_on() -> None:
        async for chunk in bodies:
            read.append(chunk)

    with pytest.raises(RelayCut) as cut:
        await read_on()
    assert cut.value.reason == "unstored"
    # Everything before the message that did not fit, once, in order; nothing after it.
    assert [e.data for e in _events(read)] == [_plain(n) for n in range(3, 11)]


async def test_events_evicted_before_they_are_read_back_cut_the_stream(
    container: Container,
) -> None:
    """The generation keeps 40 events (the fixture's `default_max_events`): a client
    behind by more than that cannot be sent what was evicted."""
    call = Call(container, 150)
    for n in range(1, 60):
        call.send(_message(n))
    call.send('{"jsonrpc":"2.0","id":7,"result":{}}', terminal=True)
    events, cut = await call.received()
    assert cut is not None
    assert cut.reason == "evicted"
    assert [e.data for e in events] == [_message(n) for n in range(1, 1 + len(events))]


async def test_a_client_that_left_is_kept_nothing(container: Container) -> None:
    call = Call(container, 1_000_000)
    for n in range(1, 6):
        call.send(_message(n))
    call.backlog.close()
    call.send(_message(6))
    await call.recorder.drain()
    assert call.backlog.held == 0


async def test_a_log_that_cannot_be_read_back_ends_the_stream_without_a_skip(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The messages to read back are in the log, which cannot be read for now: the
    stream ends before them (the client reconnects with its last id, answered from the
    log), and nothing after them is sent in their stead."""
    failing = Failing(container)
    monkeypatch.setattr(container.eventlog, "append", failing.append)
    monkeypatch.setattr(relay, "_READ_RETRIES", (0.01,))

    async def unreadable(*_args: Any, **_kw: Any) -> Any:
        raise StorageUnavailable("the database is down (a test says so)")

    call = Call(container, 60)
    for n in range(1, 5):
        call.send(_plain(n))  # the first held, the rest to read back
    await call.recorder.drain()
    failing.fail = True
    call.send(_plain(5))  # unstored, behind the ones to read back
    monkeypatch.setattr(container.reads, "step", unreadable)
    events, cut = await call.received()
    assert cut is None
    assert [e.data for e in events] == [_plain(1)]
