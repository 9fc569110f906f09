"""The client's append channel against the real service, as a process, on both databases.

Appends over one WebSocket (`GET /v1/append`) answer exactly as the REST append does (the
same results, the same typed errors); many streams share the channel; a channel dropped
by the network (a relay process cut with frames in flight) is resent with `first_seq` and
every append is stored once, in order; where a WebSocket cannot pass (a proxy that refuses
the upgrade, a key over its channels) the appends go over REST, counted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from mcp_eventlog_client import (
    BatchTooLarge,
    EventLogClient,
    EventLogError,
    NewEvent,
    SeqConflict,
    SeqGap,
    Superseded,
    TerminalGeneration,
    UnknownGeneration,
    ValidationFailed,
)
from mcp_eventlog_client.writer import APPEND_TRANSPORT_ENV, choose_append_transport

from tests.support.processes import eventlog_service
from tests.support.relay import relay_process

pytestmark = pytest.mark.process


async def test_appends_over_the_channel_are_stored_and_a_retry_is_a_duplicate(
    base: str,
) -> None:
    async with EventLogClient(base, append_transport="channel") as log:
        opened = await log.open_generation("chan.basic")
        first = await log.append(
            opened.token, [NewEvent("a"), NewEvent("b", event="n")], first_seq=1
        )
        again = await log.append(
            opened.token, [NewEvent("a"), NewEvent("b", event="n")], first_seq=1
        )
        unnumbered = await log.append(opened.token, [NewEvent("c")])
        ended = await log.append(opened.token, [], first_seq=4, terminal=True)
        page = await log.page(opened.token)
        assert log.fallbacks == {}
        assert log.channel is not None
        assert log.channel.reconnects == 0
    assert first.event_ids == (f"{opened.token}:1", f"{opened.token}:2")
    assert (first.duplicate, again.duplicate, again.event_ids) == (False, True, first.event_ids)
    assert unnumbered.event_ids == (f"{opened.token}:3",)
    assert (ended.terminal, ended.tail_seq) == (True, 3)
    assert [(e.seq, e.event, e.data) for e in page.events] == [
        (1, None, "a"),
        (2, "n", "b"),
        (3, None, "c"),
    ]


Refusal = Callable[[EventLogClient, str], Awaitable[object]]


async def _superseded(log: EventLogClient, token: str) -> object:
    await log.open_generation("chan.refusal.superseded")
    return await log.append(token, [NewEvent("x")], first_seq=2)


async def _terminal(log: EventLogClient, token: str) -> object:
    await log.append(token, [], first_seq=2, terminal=True)
    return await log.append(token, [NewEvent("x")], first_seq=2)


REFUSALS: dict[str, tuple[Refusal, type[EventLogError]]] = {
    "seq_gap": (lambda log, t: log.append(t, [NewEvent("x")], first_seq=9), SeqGap),
    "seq_conflict": (lambda log, t: log.append(t, [NewEvent("other")], first_seq=1), SeqConflict),
    "superseded": (_superseded, Superseded),
    "terminal": (_terminal, TerminalGeneration),
    "unknown_generation": (
        lambda log, t: log.append("no-such-token", [NewEvent("x")], first_seq=1),
        UnknownGeneration,
    ),
    "validation_error": (lambda log, t: log.append(t, [], first_seq=2), ValidationFailed),
    "batch_too_large": (
        lambda log, t: log.append(t, [NewEvent("x")] * 1001, first_seq=2),
        BatchTooLarge,
    ),
}


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
async def test_a_refused_frame_is_the_rest_appends_typed_error_and_the_channel_goes_on(
    base: str, refusal: str
) -> None:
    make, expected = REFUSALS[refusal]
    seen: list[tuple[type[EventLogError], str, int]] = []
    for transport in ("rest", "channel"):
        async with EventLogClient(base, append_transport=transport) as log:
            opened = await log.open_generation(f"chan.refusal.{refusal}")
            await log.append(opened.token, [NewEvent("first")], first_seq=1)
            with pytest.raises(EventLogError) as raised:
                await make(log, opened.token)
            seen.append((type(raised.value), raised.value.code, raised.value.status))
            if transport == "channel":
                # The refusal did not close the channel: the next frame goes on it.
                fresh = await log.open_generation(f"chan.refusal.{refusal}.after")
                await log.append(fresh.token, [NewEvent("y")], first_seq=1)
                assert log.fallbacks == {}
                assert log.channel is not None
                assert log.channel.reconnects == 0
    assert seen[0] == seen[1]
    assert seen[0][0] is expected


async def write_streams(log: EventLogClient, tokens: list[str], count: int) -> None:
    """Append `count` one-event messages to each generation, all generations at once."""

    async def one(token: str) -> None:
        for seq in range(1, count + 1):
            await log.append(token, [NewEvent(f"{token[-6:]}-{seq}")], first_seq=seq)

    async with anyio.create_task_group() as tasks:
        for token in tokens:
            tasks.start_soon(one, token)


async def assert_stored_once_in_order(log: EventLogClient, tokens: list[str], count: int) -> None:
    for token in tokens:
        page = await log.page(token, limit=count + 10)
        assert page.tail_seq == count
        assert [e.data for e in page.events] == [f"{token[-6:]}-{s}" for s in range(1, count + 1)]


async def test_many_streams_share_one_channel(base: str) -> None:
    async with EventLogClient(base, append_transport="channel") as log:
        tokens = [(await log.open_generation(f"chan.many.{i}")).token for i in range(16)]
        with anyio.fail_after(120):
            await write_streams(log, tokens, 25)
        await assert_stored_once_in_order(log, tokens, 25)
        assert log.fallbacks == {}
        assert log.channel is not None
        assert log.channel.reconnects == 0


async def test_a_dropped_channel_is_resent_and_every_append_stored_once_in_order(
    base: str, tmp_path: Path
) -> None:
    with relay_process(base, tmp_path) as relay:
        async with EventLogClient(relay.url, append_transport="channel") as log:
            assert log.channel is not None
            channel = log.channel
            tokens = [(await log.open_generation(f"chan.drop.{i}")).token for i in range(8)]
            cuts = 0

            async def cut_until_resent() -> None:
                nonlocal cuts
                # Cut the network under the writers until a cut caught frames in flight.
                while channel.resent == 0 and cuts < 50:
                    await anyio.to_thread.run_sync(relay.cut)
                    cuts += 1
                    with anyio.move_on_after(0.05):
                        await anyio.Event().wait()  # give the writers time to get going again

            with anyio.fail_after(180):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(write_streams, log, tokens, 60)
                    tasks.start_soon(cut_until_resent)
            await assert_stored_once_in_order(log, tokens, 60)
            assert channel.resent >= 1, (cuts, channel.reconnects)
            assert log.fallbacks == {}
            print(f"{cuts} cuts, {channel.resent} frames resent, {channel.reconnects} reconnects")


async def test_a_proxy_that_passes_no_websocket_sends_the_appends_over_rest(
    base: str, tmp_path: Path
) -> None:
    with relay_process(base, tmp_path, refuse_upgrades=True) as relay:
        async with EventLogClient(relay.url, append_transport="channel") as log:
            opened = await log.open_generation("chan.proxy")
            for seq in range(1, 6):
                await log.append(opened.token, [NewEvent(f"m{seq}")], first_seq=seq)
            page = await log.page(opened.token)
            fallbacks = dict(log.fallbacks)
        stats = relay.stats()
    assert [e.data for e in page.events] == [f"m{s}" for s in range(1, 6)]
    # One refused upgrade; the appends within `retry_seconds` after it do not try again.
    assert fallbacks == {"upgrade_refused": 1, "channel_down": 4}
    assert stats["refused"] == 1


async def test_a_key_over_its_channels_appends_over_rest(tmp_path: Path) -> None:
    env = {"EVENTLOG_CHANNEL_MAX_PER_KEY": "1"}
    with eventlog_service(f"sqlite+aiosqlite:///{tmp_path}/one.db", tmp_path, env=env) as url:
        async with (
            EventLogClient(url, append_transport="channel") as holder,
            EventLogClient(url, append_transport="channel") as second,
        ):
            opened = await holder.open_generation("chan.perkey")
            await holder.append(opened.token, [NewEvent("1")], first_seq=1)
            await second.append(opened.token, [NewEvent("2")], first_seq=2)
            await second.append(opened.token, [NewEvent("3")], first_seq=3)
            page = await second.page(opened.token)
            assert holder.fallbacks == {}
            assert second.fallbacks == {"too_many_channels": 1, "channel_down": 1}
    assert [e.data for e in page.events] == ["1", "2", "3"]


def test_the_transport_is_the_argument_else_the_environment_else_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(APPEND_TRANSPORT_ENV, raising=False)
    assert choose_append_transport(None, "channel") == "channel"
    assert EventLogClient("http://127.0.0.1:9").channel is None  # the plain client: REST
    monkeypatch.setenv(APPEND_TRANSPORT_ENV, "rest")
    assert choose_append_transport(None, "channel") == "rest"
    assert choose_append_transport("channel", "rest") == "channel"
    monkeypatch.setenv(APPEND_TRANSPORT_ENV, "carrier-pigeon")
    with pytest.raises(ValueError, match="carrier-pigeon"):
        choose_append_transport(None, "channel")
