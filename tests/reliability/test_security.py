"""Security checks: unguessable tokens, no event data in logs, no cross-stream or
cross-tenant read through any route, and no route reachable without the right scope.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import re
import secrets
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import app.domain.ids as ids
from app.api.app import create_app
from tests.support.app import app_client, make_settings
from tests.support.processes import ServerProcess

TOKEN = re.compile(r"[A-Za-z0-9_-]{22,}")
PUBLIC = {
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
}


# --- tokens -----------------------------------------------------------------------------


def test_new_token_draws_at_least_128_bits_from_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """`new_token` asks the `secrets` module (a CSPRNG) for >= 16 bytes, nothing else."""
    asked: list[int] = []

    class Spy:
        @staticmethod
        def token_urlsafe(nbytes: int) -> str:
            asked.append(nbytes)
            return secrets.token_urlsafe(nbytes)

    monkeypatch.setattr(ids, "secrets", Spy)
    token = ids.new_token()
    assert asked
    assert min(asked) >= 16
    assert len(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))) >= 16


def test_tokens_look_random() -> None:
    """20,000 tokens: unique, URL-safe, no `:`, 128 bits each, characters near-uniform."""
    tokens = [ids.new_token() for _ in range(20_000)]
    assert len(set(tokens)) == len(tokens)
    assert all(TOKEN.fullmatch(t) and ":" not in t for t in tokens)
    assert {len(base64.urlsafe_b64decode(t + "==")) for t in tokens} == {16}
    # Each of the first 21 characters carries 6 random bits (the 22nd carries the last 2):
    # the empirical entropy per position must be close to log2(64) = 6.
    for position in range(21):
        counts = Counter(t[position] for t in tokens)
        entropy = -sum(n / len(tokens) * math.log2(n / len(tokens)) for n in counts.values())
        assert entropy > 5.95, (position, entropy)


async def test_api_tokens_are_fresh_and_unrelated(client: httpx.AsyncClient) -> None:
    """Tokens the API hands out have the same form and share no prefix run (not counters)."""
    tokens = [
        (await client.post(f"/v1/streams/s{i % 3}/generations")).json()["generation"]
        for i in range(60)
    ]
    assert len(set(tokens)) == 60
    assert all(TOKEN.fullmatch(t) for t in tokens)
    shared = [len(_common_prefix(a, b)) for a, b in itertools.pairwise(tokens)]
    assert max(shared) < 5


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


# --- logs -------------------------------------------------------------------------------


async def _exercise(http: httpx.AsyncClient, marker: str) -> None:
    """Every path event data can take: stored, refused, conflicting, resumed, paged, explained."""
    token = (await http.post("/v1/streams/logs/generations", json={"producer": "p"})).json()[
        "generation"
    ]
    url = f"/v1/generations/{token}/events"
    assert (
        await http.post(url, json={"events": [{"data": marker}], "first_seq": 1})
    ).status_code == 201
    conflict = await http.post(url, json={"events": [{"data": marker + "!"}], "first_seq": 1})
    assert conflict.status_code == 409
    assert (await http.post(url, json={"events": [{"data": marker + "\x00"}]})).status_code == 422
    big = await http.post(url, json={"events": [{"data": marker * 50_000}]})
    assert big.status_code == 413
    bad = await http.post(
        url,
        content=f'{{"events": [{{"data": "{marker}"',
        headers={"content-type": "application/json"},
    )
    assert bad.status_code == 422
    assert (
        await http.post("/v1/streams/logs/resume", json={"last_event_id": f"{token}:0"})
    ).status_code == 200
    assert (await http.get(url, params={"after": 0})).status_code == 200
    await http.post("/admin/v1/explain", json={"last_event_id": f"{token}:0"})
    await http.post(url, json={"events": [{"data": marker}], "terminal": True})


@pytest.mark.process
@pytest.mark.parametrize(("log_level", "log_format"), [("info", "json"), ("debug", "text")])
async def test_event_data_never_reaches_the_logs(
    database_url: str,
    tmp_path: Path,
    log_format: str,
    log_level: str,
) -> None:
    """A real process, fed distinctive data on every path, never logs it (whole log).

    At `debug` this includes the database drivers' loggers (aiosqlite logs statement
    parameters at DEBUG; the service holds driver loggers at WARNING since 995eaa6).
    """
    marker = f"EVENT-DATA-{secrets.token_hex(8)}"
    env = {"EVENTLOG_LOG_LEVEL": log_level, "EVENTLOG_LOG_FORMAT": log_format}
    server = ServerProcess(database_url, log_path=tmp_path / "server.log", env=env)
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            await _exercise(http, marker)
    finally:
        server.stop()
    log = server.log()
    assert "/v1/streams/logs/generations" in log, "the access log did not run: nothing was checked"
    assert marker not in log


async def test_the_apps_own_loggers_never_log_event_data(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """In-process, every `app.*` logger at DEBUG: the service's own code never logs data."""
    marker = f"EVENT-DATA-{secrets.token_hex(8)}"
    caplog.set_level("DEBUG", logger="app")
    async with app_client(make_settings(database_url, log_level="debug")) as http:
        await _exercise(http, marker)
    assert any(r.name.startswith("app") for r in caplog.records), "nothing logged: unchecked"
    assert marker not in caplog.text
    assert all(marker not in str(r.args) for r in caplog.records)


# --- cross-stream -----------------------------------------------------------------------


async def _stream_with_events(http: httpx.AsyncClient, stream: str, data: list[str]) -> str:
    token: str = (await http.post(f"/v1/streams/{stream}/generations")).json()["generation"]
    body = {"events": [{"data": d} for d in data]}
    assert (await http.post(f"/v1/generations/{token}/events", json=body)).status_code == 201
    return token


async def test_no_cross_stream_read_through_any_route(client: httpx.AsyncClient) -> None:
    """B's token never yields B's events on a route about stream A, and vice versa."""
    a_old = await _stream_with_events(client, "A", ["a1", "a2"])
    a_new = await _stream_with_events(client, "A", ["A1"])  # supersedes a_old, fully retained
    b_token = await _stream_with_events(client, "B", ["b1", "b2", "b3"])
    for claim in (f"{b_token}:0", f"{b_token}:1", f"{b_token}:3"):
        answer = (await client.post("/v1/streams/A/resume", json={"last_event_id": claim})).json()
        assert (answer["verdict"], answer["reason"]) == ("invalid", "cross_stream")
        assert (answer["events"], answer["generation"]) == ([], None)
    # A stale id of A asked about B: cross_stream (row 3) wins over superseded (row 5);
    # in particular B never receives A's fresh generation as its "start over".
    answer = (
        await client.post("/v1/streams/B/resume", json={"last_event_id": f"{a_old}:1"})
    ).json()
    assert (answer["reason"], answer["events"], answer["generation"]) == ("cross_stream", [], None)
    # The superseded reset on A delivers A's current generation, never B's.
    answer = (
        await client.post("/v1/streams/A/resume", json={"last_event_id": f"{a_old}:1"})
    ).json()
    assert (answer["reason"], answer["generation"]) == ("superseded", a_new)
    assert [e["data"] for e in answer["events"]] == ["A1"]
    # /v1/resume takes the stream from the token: B's id resumes B, only B.
    answer = (await client.post("/v1/resume", json={"last_event_id": f"{b_token}:1"})).json()
    assert (answer["stream_id"], [e["data"] for e in answer["events"]]) == ("B", ["b2", "b3"])
    # Paging is by token: B's token pages B's events only.
    page = (await client.get(f"/v1/generations/{b_token}/events")).json()
    assert [e["data"] for e in page["events"]] == ["b1", "b2", "b3"]
    explained = await client.post(
        "/admin/v1/explain", json={"stream_id": "A", "last_event_id": f"{b_token}:1"}
    )
    assert explained.json()["reason"] == "cross_stream"
    # Opening on A fenced only A: B's generation still takes appends.
    more = await client.post(f"/v1/generations/{b_token}/events", json={"events": [{"data": "b4"}]})
    assert more.status_code == 201


# --- scopes and tenants -----------------------------------------------------------------

WRITER_1, WRITER_2, ADMIN = ("w1-" + "x" * 20, "w2-" + "y" * 20, "ad-" + "z" * 20)
KEYS = [
    {"scope": "writer", "tenant": "t1", "key": WRITER_1},
    {"scope": "writer", "tenant": "t2", "key": WRITER_2},
    {"scope": "admin", "key": ADMIN},
]


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _routes(database_url: str) -> list[tuple[str, str]]:
    """Every (method, path) the app documents in its OpenAPI (new routes included)."""
    document = create_app(make_settings(database_url)).openapi()
    return [
        (method.upper(), path)
        for path, operations in document["paths"].items()
        if path not in PUBLIC
        for method in operations
    ]


@pytest.fixture
async def keyed(database_url: str) -> Any:
    """An in-process client of a service with keys for two writer tenants and an admin."""
    settings = make_settings(database_url, keys=KEYS)
    async with app_client(settings) as http:
        yield http


async def test_no_route_without_the_right_scope(
    keyed: httpx.AsyncClient, database_url: str
) -> None:
    """Every non-public route: 401 without a valid key, 403 with a key of the other scope."""
    routes = _routes(database_url)
    assert any(p.startswith("/admin/") for _, p in routes)
    assert any(p.startswith("/v1/") for _, p in routes)
    nobody: list[dict[str, str]] = [
        {},
        _bearer("not-a-key-at-all"),
        {"Authorization": WRITER_1},
        {"Authorization": f"Basic {WRITER_1}"},
    ]
    for method, template in routes:
        path = template.format(
            stream_id="s", generation="AAAAAAAAAAAAAAAAAAAAAA", task_id="AAAAAAAAAAAAAAAAAAAAAA"
        )
        for headers in nobody:
            answer = await keyed.request(method, path, json={}, headers=headers)
            assert answer.status_code == 401, (method, path, headers, answer.text)
            assert answer.json()["code"] == "unauthorized"
        wrong = ADMIN if template.startswith("/v1/") else WRITER_1
        answer = await keyed.request(method, path, json={}, headers=_bearer(wrong))
        assert (answer.status_code, answer.json()["code"]) == (403, "forbidden"), (method, path)


async def test_no_cross_tenant_read_through_any_route(keyed: httpx.AsyncClient) -> None:
    """Tenant 2 cannot see, page, resume, append to or fence tenant 1's streams."""
    t1, t2 = _bearer(WRITER_1), _bearer(WRITER_2)
    opened = await keyed.post("/v1/streams/shared-name/generations", headers=t1)
    token = opened.json()["generation"]
    body = {"events": [{"data": "tenant-1 secret"}]}
    assert (
        await keyed.post(f"/v1/generations/{token}/events", json=body, headers=t1)
    ).status_code == 201
    probes: list[Callable[[], Any]] = [
        lambda: keyed.get(f"/v1/generations/{token}/events", headers=t2),
        lambda: keyed.post(f"/v1/generations/{token}/events", json=body, headers=t2),
        lambda: keyed.get("/v1/streams/shared-name", headers=t2),
    ]
    for probe in probes:
        answer = await probe()
        assert answer.status_code == 404, answer.text
        assert "tenant-1 secret" not in answer.text
    for url in ("/v1/resume", "/v1/streams/shared-name/resume"):
        answer = await keyed.post(url, json={"last_event_id": f"{token}:0"}, headers=t2)
        verdict = answer.json()
        assert (verdict["verdict"], verdict["reason"]) == ("invalid", "unknown_generation")
        assert verdict["events"] == []
    # Tenant 2's stream of the same name is its own: opening it fences nothing of tenant 1.
    assert (await keyed.post("/v1/streams/shared-name/generations", headers=t2)).status_code == 201
    resumed = await keyed.post(
        "/v1/streams/shared-name/resume", json={"last_event_id": f"{token}:0"}, headers=t1
    )
    assert resumed.json()["reason"] == "ok"
    assert [e["data"] for e in resumed.json()["events"]] == ["tenant-1 secret"]
    # The admin (every tenant) sees both; a writer key on admin routes is refused above.
    streams = (await keyed.get("/admin/v1/streams", headers=_bearer(ADMIN))).json()
    assert json.dumps(streams).count("shared-name") >= 2


def test_every_protected_operation_documents_401_and_403() -> None:
    """A client generated from `/openapi.json` must know a route can answer 401 and 403."""
    document = create_app(make_settings("sqlite+aiosqlite:///unused.db")).openapi()
    undocumented = [
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        if path not in PUBLIC
        for method, operation in operations.items()
        if not {"401", "403"} <= set(operation["responses"])
    ]
    assert undocumented == []
