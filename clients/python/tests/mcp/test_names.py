"""Service stream names of SDK streams: within the contract's alphabet, and reversible.

The shared table both stores are checked against is in `test_convention.py`.
"""

from __future__ import annotations

import re

import pytest
from mcp_eventlog_client.mcp.names import MAX_STREAM_ID, StreamNames

CONTRACT_STREAM_ID = re.compile(r"[A-Za-z0-9._~:@=+-]{1,256}")


@pytest.mark.parametrize(
    "sdk_stream",
    ["1", "_GET_stream", "req-7.a", "with space/slash", "~tilde~7e", "ünï ✓", "x" * 300, ""],
)
def test_names_fit_the_contract_and_read_back(sdk_stream: str) -> None:
    names = StreamNames()
    name = names.name("scopeKey_-1", sdk_stream)
    assert CONTRACT_STREAM_ID.fullmatch(name)
    assert len(name) <= MAX_STREAM_ID
    assert names.parse(name) == ("scopeKey_-1", sdk_stream)


def test_same_sdk_stream_in_two_sessions_has_two_names() -> None:
    names = StreamNames()
    assert names.name("A", "1") != names.name("B", "1")


@pytest.mark.parametrize("foreign", ["sess-1.req-7", "mcp.", "mcp.scope", "mcp..1", "other.a.b"])
def test_names_not_made_here_are_not_read(foreign: str) -> None:
    assert StreamNames().parse(foreign) is None


def test_a_long_name_is_forgotten_past_the_bound() -> None:
    names = StreamNames(max_hashed=1)
    first = names.name("A", "y" * 300)
    names.name("A", "z" * 300)
    assert names.parse(first) is None
