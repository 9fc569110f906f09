"""Request bodies are strict, field by field (`app/api/schemas.py`), on both databases.

Each case sends a value that lax parsing would coerce ("47" → 47, 1.0 → 1, 1 → true) and
checks it is refused with 422 and that nothing was stored: if a request model lost
`strict=True` (or `extra="forbid"`), one of these fails. Labels shown to operators take
no control or bidi character; event data is free text. The answers the Python client reads
are built from its records' field lists (`client_record_model`)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import httpx
import pytest
from mcp_eventlog_client import models as client
from mcp_eventlog_client.task_records import Task, TaskAppend
from pydantic import BaseModel

from app.api.routes.task_schemas import TaskAppendResponse, TaskOut
from app.api.schemas import (
    AppendResponse,
    EventOut,
    PageResponse,
    ResumeResponse,
    client_record_model,
)
from tests.support.strict_bodies import APPEND, LAX, OPEN, assert_refused, problem_code, state


@pytest.mark.parametrize(("path", "body"), LAX, ids=[f"{p} {json.dumps(b)}" for p, b in LAX])
async def test_a_value_lax_parsing_would_coerce_is_refused(
    client: httpx.AsyncClient, token: str, path: str, body: dict[str, Any]
) -> None:
    await assert_refused(client, path, token, json.dumps(body).encode(), "validation_error")


# Escape sequences, C0/DEL/C1 controls and bidirectional overrides.
LABELS = ["\x1b[31mred", "\x1b]0;title\x07", "a\tb", "\x7f", "\x85", "abc\u202edcba", "x\u2066y"]


@pytest.mark.parametrize("label", LABELS)
async def test_control_and_bidi_characters_are_refused_in_labels(
    client: httpx.AsyncClient, token: str, label: str
) -> None:
    """A producer or an event type is shown to operators: no escape sequence gets in."""
    before = await state(client, token)
    opened = await client.post(OPEN, json={"producer": label})
    assert problem_code(opened) == "validation_error"
    appended = await client.post(
        APPEND.format(token=token), json={"events": [{"data": "x", "event": label}]}
    )
    assert problem_code(appended) == "validation_error"
    assert await state(client, token) == before


async def test_data_is_free_text(client: httpx.AsyncClient, token: str) -> None:
    """Event data may hold any valid text (tabs, escapes, bidi): it is the writer's."""
    data = "line 1\n\tline 2 \x1b[0m \u202e\r\n"
    answer = await client.post(APPEND.format(token=token), json={"events": [{"data": data}]})
    assert answer.status_code == 201, answer.text
    page = (await client.get(f"/v1/generations/{token}/events")).json()
    assert page["events"][-1]["data"] == data


def test_the_answers_the_client_reads_are_its_records_field_lists() -> None:
    """The task, append, event, resume and page answers are built from the client's records:
    the two ends of the contract have one field list, in one order."""
    pairs: list[tuple[type[BaseModel], type[Any]]] = [
        (TaskOut, Task),
        (TaskAppendResponse, TaskAppend),
        (AppendResponse, client.AppendResult),
        (EventOut, client.StoredEvent),
        (ResumeResponse, client.ResumeAnswer),
    ]
    for model, record in pairs:
        assert list(model.model_fields) == [field.name for field in dataclasses.fields(record)]
    page = [field.name for field in dataclasses.fields(client.EventPage)]
    assert list(PageResponse.model_fields) == [*page, "abandoned"]


def test_a_change_to_a_field_the_client_record_lacks_is_refused() -> None:
    """A field the client renamed or dropped cannot keep a stale description or type."""
    with pytest.raises(TypeError, match="StoredEvent has no field seqs"):
        client_record_model(client.StoredEvent, seqs=int)
