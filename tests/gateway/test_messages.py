"""What the gateway stores for a message (`app/gateway/messages.py`), and the names it
stores them under: the stores' convention, by the same table
(`tests/fixtures/stream-convention.json`) both stores' suites read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_eventlog_client.convention import (
    Reassembly,
    StreamNames,
    Unjoinable,
    request_id_of,
    sdk_stream_of,
)

from app.gateway.messages import bodies_of, priming_body

TABLE: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "stream-convention.json").read_text()
)


def described(case: dict[str, Any]) -> str:
    return str(case.get("description") or repr(case["sdk_stream"])[:40])


@pytest.mark.parametrize("row", TABLE["names"]["cases"], ids=described)
def test_names_match_the_table(row: dict[str, str]) -> None:
    names = StreamNames()
    assert names.name(row["scope"], row["sdk_stream"]) == row["name"]
    assert names.parse(row["name"]) == (row["scope"], row["sdk_stream"])


@pytest.mark.parametrize("case", TABLE["split"]["cases"], ids=described)
def test_a_message_is_stored_as_the_table_says(case: dict[str, Any]) -> None:
    data = case["data"]
    bodies = [priming_body()] if data is None else bodies_of(data, case["max_event_bytes"])
    assert [{"event": b.event, "data": b.data} for b in bodies] == case["events"]


@pytest.mark.parametrize(
    "case",
    [c for c in TABLE["join"]["cases"] if c.get("error") in (None, "mid_message")],
    ids=described,
)
def test_stored_events_are_joined_as_the_table_says(case: dict[str, Any]) -> None:
    joiner, joined = Reassembly(), []
    try:
        for event in case["events"]:
            message = joiner.feed(event["event"], event["data"])
            if message is not None:
                joined.append(message)
    except Unjoinable:
        assert case["error"] == "mid_message"
        assert joined == case.get("messages", [])
        return
    assert "error" not in case
    assert joined == case["messages"]


@pytest.mark.parametrize(("request_id", "sdk_stream"), [(7, "7"), ("req-7", "req-7"), (-1, "-1")])
def test_a_request_id_names_its_stream_and_back(request_id: int | str, sdk_stream: str) -> None:
    assert sdk_stream_of(request_id) == sdk_stream
    assert request_id_of(sdk_stream) == request_id
    assert request_id_of("_GET_stream") is None
