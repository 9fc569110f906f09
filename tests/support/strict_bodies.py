"""Requests of the strict-body tests: the paths of every request model, a request's raw
body, what a refused request must leave as it was, and the 422 problem code."""

from __future__ import annotations

from typing import Any

import httpx

TOKEN = "{token}"


OPEN = "/v1/streams/strict/generations"


APPEND = "/v1/generations/{token}/events"


RESUME = "/v1/streams/strict/resume"


RESUME_ANY = "/v1/resume"


EXPLAIN = "/admin/v1/explain"


async def state(client: httpx.AsyncClient, token: str) -> Any:
    """What a refused request must leave as it was: the stream and the generation's events."""
    stream = (await client.get("/v1/streams/strict")).json()
    page = (await client.get(f"/v1/generations/{token}/events")).json()
    return stream["generations"], stream["current"]["tail_seq"], page["events"]


async def post_raw(client: httpx.AsyncClient, path: str, token: str, raw: bytes) -> httpx.Response:
    """POST `raw` as JSON to `path`, the placeholder token replaced by `token` in both."""
    return await client.post(
        path.format(token=token),
        content=raw.replace(TOKEN.encode(), token.encode()),
        headers={"content-type": "application/json"},
    )


def problem_code(answer: httpx.Response) -> str:
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    code: str = answer.json()["code"]
    return code
