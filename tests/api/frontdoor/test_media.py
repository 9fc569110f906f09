"""Bodies are strict JSON, declared as such (`app/api/frontdoor/media.py`), on both databases.

A body that declares no JSON, or an encoding, is 415; a key twice in one object and a
lone surrogate anywhere in a body are refused (422) and nothing is stored; paired
surrogate escapes are text."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from tests.support.front_door import assert_problem
from tests.support.strict_bodies import APPEND, DUPLICATED, SURROGATES, assert_refused


@pytest.mark.parametrize(("path", "raw"), DUPLICATED, ids=[r.decode() for _p, r in DUPLICATED])
async def test_a_key_twice_in_one_object_is_refused(
    client: httpx.AsyncClient, token: str, path: str, raw: bytes
) -> None:
    await assert_refused(client, path, token, raw, "invalid_json", saying="appears twice")


@pytest.mark.parametrize(("path", "raw"), SURROGATES, ids=[r.decode() for _p, r in SURROGATES])
async def test_a_lone_surrogate_anywhere_in_a_body_is_refused(
    client: httpx.AsyncClient, token: str, path: str, raw: bytes
) -> None:
    """Never a 500, never stored, never decided (so never in the audit log)."""
    await assert_refused(client, path, token, raw, "validation_error", saying="UTF-8")
    decisions = (await client.get("/admin/v1/decisions")).json()["decisions"]
    assert decisions == []


async def test_paired_surrogate_escapes_are_text(client: httpx.AsyncClient, token: str) -> None:
    """An emoji from an ASCII-only JSON encoder (`\\ud83d\\ude00`) is valid and stored."""
    raw = b'{"events": [{"data": "\\ud83d\\ude00 ok", "event": "smile\\ud83d\\ude00"}]}'
    answer = await client.post(
        APPEND.format(token=token), content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 201, answer.text
    page = (await client.get(f"/v1/generations/{token}/events")).json()
    assert (page["events"][-1]["data"], page["events"][-1]["event"]) == ("😀 ok", "smile😀")


async def test_a_cross_site_form_post_neither_opens_nor_fences(
    open_app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """A body-less POST declaring a form (what `<form method=post>` sends) is 415."""
    _app, http = open_app
    live = (await http.post("/v1/streams/s1/generations")).json()["generation"]
    for kind in ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain"):
        for path in ("/v1/streams/s1/generations", f"/admin/v1/generations/{live}/terminate"):
            refused = await http.post(path, headers={"content-type": kind})
            assert_problem(refused, 415, "unsupported_media_type")
    appended = await http.post(f"/v1/generations/{live}/events", json={"events": [{"data": "x"}]})
    assert appended.status_code == 201, appended.text  # still current, not terminal
    assert (await http.get("/v1/streams/s1")).json()["generations"] == 1


async def test_an_encoded_body_is_refused(open_app: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _app, http = open_app
    for encoding in ("gzip", "deflate", "br"):
        refused = await http.post(
            "/v1/streams/s1/generations",
            content=b"{}",
            headers={"content-type": "application/json", "content-encoding": encoding},
        )
        assert_problem(refused, 415, "unsupported_media_type")
    plain = await http.post(
        "/v1/streams/s1/generations",
        content=b"{}",
        headers={"content-type": "application/json", "content-encoding": "identity"},
    )
    assert plain.status_code == 201
