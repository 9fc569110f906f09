"""The storage convention both MCP stores share, against the one table both suites read
(`tests/fixtures/stream-convention.json`; the TypeScript suite reads the same file in
`clients/typescript/test/convention.test.ts`): names, the split of a message into events,
the join of stored events back into messages, and the placeholder of an unstored message.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp_eventlog_client.mcp.events import Reassembly, Unjoinable, events_of
from mcp_eventlog_client.mcp.names import MAX_STREAM_ID, StreamNames
from mcp_eventlog_client.mcp.refusal import UNSTORED_PREFIX, new_placeholder
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError

TABLE: dict[str, Any] = json.loads(
    (
        Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "stream-convention.json"
    ).read_text()
)
NAMES: list[dict[str, str]] = TABLE["names"]["cases"]
CONTRACT_STREAM_ID = re.compile(r"[A-Za-z0-9._~:@=+-]{1,256}")


def described(case: dict[str, Any]) -> str:
    return str(case.get("description") or repr(case["sdk_stream"])[:40])


@pytest.mark.parametrize("row", NAMES, ids=described)
def test_names_match_the_table(row: dict[str, str]) -> None:
    names = StreamNames()
    assert names.name(row["scope"], row["sdk_stream"]) == row["name"]
    assert CONTRACT_STREAM_ID.fullmatch(row["name"])
    assert names.parse(row["name"]) == (row["scope"], row["sdk_stream"])


def test_the_names_cover_escaping_and_hashing() -> None:
    hashed = [row for row in NAMES if ".~h" in row["name"]]
    assert len(hashed) >= 2
    assert any(len(row["name"]) == MAX_STREAM_ID for row in NAMES)  # the longest plain one
    assert any("~" in row["name"].split(".", 2)[2] for row in NAMES if row not in hashed)


@pytest.mark.parametrize("case", TABLE["split"]["cases"], ids=described)
def test_a_message_is_split_as_the_table_says(case: dict[str, Any]) -> None:
    events = events_of(case["data"], case["max_event_bytes"])
    assert [{"event": e.event, "data": e.data} for e in events] == case["events"]
    assert all(len(e.data.encode()) <= case["max_event_bytes"] for e in events)


def test_a_large_result_is_split_as_the_table_says() -> None:
    large = TABLE["split"]["large"]
    unit: str = large["unit"]
    raw = (unit * (large["bytes"] // len(unit.encode()) + 1)).encode()[: large["bytes"]]
    result = {"content": [{"type": "text", "text": raw.decode(errors="ignore")}], "isError": False}
    message = json.dumps(
        {"jsonrpc": "2.0", "id": 9, "result": result}, separators=(",", ":"), ensure_ascii=False
    )
    assert hashlib.sha256(message.encode()).hexdigest() == large["message_sha256"]
    events = events_of(message, large["max_event_bytes"])
    assert [
        {
            "event": e.event,
            "bytes": len(e.data.encode()),
            "sha256": hashlib.sha256(e.data.encode()).hexdigest(),
        }
        for e in events
    ] == large["events"]


def join(events: list[dict[str, Any]]) -> tuple[list[str], str | None]:
    """What a replay makes of stored events: the messages sent, then the refusal reason."""
    joined, messages = Reassembly(), []
    try:
        for event in events:
            whole = joined.feed(event["event"], event["data"])
            if whole is None:
                continue
            try:
                jsonrpc_message_adapter.validate_json(whole, by_name=False)
            except ValidationError:
                return messages, "not_a_message"
            messages.append(whole)
    except Unjoinable as bad:
        return messages, bad.reason
    return messages, None


@pytest.mark.parametrize("case", TABLE["join"]["cases"], ids=described)
def test_stored_events_are_joined_as_the_table_says(case: dict[str, Any]) -> None:
    assert join(case["events"]) == (case.get("messages", []), case.get("error"))


def test_placeholders_have_the_tables_form() -> None:
    placeholder = TABLE["placeholder"]
    assert placeholder["prefix"] == UNSTORED_PREFIX
    made = {new_placeholder() for _ in range(100)}
    assert len(made) == 100
    assert all(re.fullmatch(placeholder["pattern"], p) for p in made)
