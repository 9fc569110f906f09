"""The gateway's SSE parser and writer (the upstream's bytes in, the client's bytes out)."""

from __future__ import annotations

import pytest

from app.gateway.sse import SseEvent, SseParser, SseTooLarge, encode


def parse(*pieces: str, limit: int = 1000) -> list[SseEvent]:
    parser = SseParser(limit)
    return [event for piece in pieces for event in parser.feed(piece)]


def test_events_are_dispatched_at_blank_lines_whatever_the_line_ends() -> None:
    text = 'id: 1\r\ndata: {"a":\r\ndata: 1}\r\n\r\nevent: x\rdata: y\r\rretry: 50\n\n'
    assert parse(text) == [
        SseEvent('{"a":\n1}', id="1"),
        SseEvent("y", event="x"),
        SseEvent(None, retry=50),
    ]


@pytest.mark.parametrize("cut", range(1, 30))
def test_pieces_cut_anywhere_give_the_same_events(cut: int) -> None:
    text = "id: a\r\ndata: one\r\n\r\n: comment\n\ndata:two\n\n"
    assert parse(text[:cut], text[cut:]) == [SseEvent("one", id="a"), SseEvent("two")]


def test_a_priming_event_has_empty_data() -> None:
    assert parse("id: x\ndata:\n\n") == [SseEvent("", id="x")]


def test_an_event_over_the_limit_is_refused() -> None:
    with pytest.raises(SseTooLarge):
        parse("data: " + "x" * 50 + "\n", limit=40)
    with pytest.raises(SseTooLarge):
        parse("data: " + "x" * 50, limit=40)  # no line end at all


def test_what_is_written_parses_back() -> None:
    written = encode('{"a":\n1}', id="t:1", event="m") + encode("", id="t:2")
    assert parse(written.decode()) == [
        SseEvent('{"a":\n1}', id="t:1", event="m"),
        SseEvent("", id="t:2"),
    ]
