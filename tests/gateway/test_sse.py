"""The gateway's SSE parser and writer (the upstream's bytes in, the client's bytes out)."""

from __future__ import annotations

import pytest

from app.event_stream import event_text
from app.gateway.sse import SseEvent, SseParser, SseTooLarge


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
    written = event_text('{"a":\n1}', id="t:1", event="m") + event_text("", id="t:2")
    assert parse(written) == [
        SseEvent('{"a":\n1}', id="t:1", event="m"),
        SseEvent("", id="t:2"),
    ]


def test_many_events_in_one_piece_and_one_line_in_many() -> None:
    """A piece holding thousands of events, and a line arriving in thousands of pieces,
    parse as they would a piece at a time (the parser is linear in what it is fed)."""
    parser = SseParser(1 << 20)
    piece = "".join(f"id: {n}\r\ndata: {n}\r\n\r\n" for n in range(5_000))
    events = parser.feed(piece[:-1]) + parser.feed(piece[-1:])
    assert [(e.id, e.data) for e in events] == [(str(n), str(n)) for n in range(5_000)]
    long = "x" * 100_000
    fed = [parser.feed("data: ")] + [parser.feed(long[i : i + 10]) for i in range(0, 100_000, 10)]
    assert fed == [[]] * 10_001
    assert parser.feed("\n\n") == [SseEvent(long)]
    for _ in range(104):
        parser.feed("y" * 10_000)  # 1,040,000 characters held: under the limit
    with pytest.raises(SseTooLarge):
        parser.feed("y" * 10_000)
