"""Tokens, event ids and stream ids."""

from __future__ import annotations

import math
import re

import pytest

from app.domain.ids import (
    EventId,
    format_event_id,
    is_valid_stream_id,
    new_token,
    parse_event_id,
)


def test_tokens_are_url_safe_128_bit_and_fresh() -> None:
    tokens = {new_token() for _ in range(1000)}
    assert len(tokens) == 1000
    for token in tokens:
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", token)
        assert ":" not in token
    assert 22 * math.log2(64) >= 128


def test_event_ids_round_trip() -> None:
    token = new_token()
    assert parse_event_id(format_event_id(token, 47)) == EventId(token, 47)
    assert parse_event_id(f"{token}:0") == EventId(token, 0)


@pytest.mark.parametrize(
    ("stream_id", "valid"),
    [
        ("sess-1.req-7", True),
        ("a:b@c=d+e~f_g", True),
        ("x" * 256, True),
        ("", False),
        ("x" * 257, False),
        ("a/b", False),
        ("a b", False),
        ("é", False),
        ("a\n", False),
        # Only dots: path segments a client's URL normalisation removes.
        (".", False),
        ("..", False),
        ("...", False),
        (".a", True),
        ("a..", True),
        ("." * 255 + "a", True),
    ],
)
def test_stream_ids(stream_id: str, valid: bool) -> None:
    assert is_valid_stream_id(stream_id) is valid
