"""Small helpers that call the writer API and check the status on the way."""

from __future__ import annotations

from typing import Any

import httpx


async def open_generation(
    client: httpx.AsyncClient, stream_id: str, expect: int = 201, **options: Any
) -> dict[str, Any]:
    """Open a generation and return its JSON."""
    response = await client.post(f"/v1/streams/{stream_id}/generations", json=options or None)
    assert response.status_code == expect, response.text
    body: dict[str, Any] = response.json()
    return body


async def append(
    client: httpx.AsyncClient,
    token: str,
    data: list[str],
    *,
    expect: int = 201,
    first_seq: int | None = None,
    terminal: bool = False,
    event: str | None = None,
) -> dict[str, Any]:
    """Append `data` as events and return the JSON answer (body or problem)."""
    payload: dict[str, Any] = {"events": [{"data": d, "event": event} for d in data]}
    if first_seq is not None:
        payload["first_seq"] = first_seq
    if terminal:
        payload["terminal"] = True
    response = await client.post(f"/v1/generations/{token}/events", json=payload)
    assert response.status_code == expect, response.text
    body: dict[str, Any] = response.json()
    return body


async def open_token(client: httpx.AsyncClient, stream_id: str, **options: Any) -> str:
    """Open a generation (201 expected) and return its token."""
    token: str = (await open_generation(client, stream_id, **options))["generation"]
    return token


async def append_data(
    client: httpx.AsyncClient, token: str, *data: str, event: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Append one event per `data` (201 expected), with `extra` as more fields of the body
    (`first_seq`, `terminal`); the answer. An event carries `event` only when one is given."""
    events = [{"data": d} if event is None else {"data": d, "event": event} for d in data]
    response = await client.post(
        f"/v1/generations/{token}/events", json={"events": events, **extra}
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def resume(
    client: httpx.AsyncClient, last_event_id: str, stream_id: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Ask for a verdict (on the stream route when `stream_id` is given)."""
    url = "/v1/resume" if stream_id is None else f"/v1/streams/{stream_id}/resume"
    response = await client.post(url, json={"last_event_id": last_event_id, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def datas(events: list[dict[str, Any]]) -> list[str]:
    """The data of each event, in order."""
    return [e["data"] for e in events]


def seqs(events: list[dict[str, Any]]) -> list[int]:
    """The seq of each event, in order."""
    return [e["seq"] for e in events]
