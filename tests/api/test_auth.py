"""Keys, scopes and tenants: 401 vs 403, and a writer never sees another tenant."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute

from app.api.auth import OPEN_PRINCIPAL, Keyring, Scope
from app.api.routes import admin
from app.errors import Forbidden, Unauthenticated
from app.settings import KeySpec, Settings
from tests.support.operators import ADMIN, WRITER_A, WRITER_B, KeyedApp, keyed_app, ok

TOKEN = "AAAAAAAAAAAAAAAAAAAAAA"

ADMIN_ROUTES = [
    ("GET", "/admin/v1/streams", None),
    ("GET", "/admin/v1/streams/s1", None),
    ("DELETE", "/admin/v1/streams/s1", None),
    ("GET", f"/admin/v1/generations/{TOKEN}", None),
    ("GET", f"/admin/v1/generations/{TOKEN}/events", None),
    ("POST", f"/admin/v1/generations/{TOKEN}/terminate", None),
    ("POST", "/admin/v1/explain", {"last_event_id": f"{TOKEN}:1"}),
    ("GET", "/admin/v1/decisions", None),
    ("GET", "/admin/v1/stats", None),
]

WRITER_ROUTES = [
    ("POST", "/v1/streams/s1/generations", None),
    ("POST", f"/v1/generations/{TOKEN}/events", {"events": [{"data": "x"}]}),
    ("POST", "/v1/streams/s1/resume", {"last_event_id": f"{TOKEN}:1"}),
    ("POST", "/v1/resume", {"last_event_id": f"{TOKEN}:1"}),
    ("GET", f"/v1/generations/{TOKEN}/events", None),
    ("GET", "/v1/streams/s1", None),
]


keyed = pytest.fixture(keyed_app, name="keyed")


def test_every_admin_route_is_listed() -> None:
    # A new admin route must be added to ADMIN_ROUTES, or its scope goes untested.
    declared = {
        (method, route.path)
        for route in admin.router.routes
        if isinstance(route, APIRoute)
        for method in route.methods
    }
    listed = {
        (method, path.replace(TOKEN, "{generation}").replace("/s1", "/{stream_id}"))
        for method, path, _ in ADMIN_ROUTES
    }
    assert declared == listed


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES)
async def test_admin_routes_need_an_admin_key(
    keyed: KeyedApp, method: str, path: str, body: object
) -> None:
    nobody = await keyed.as_key(None).request(method, path, json=body)
    assert nobody.status_code == 401
    assert nobody.headers["www-authenticate"].startswith("Bearer")
    assert nobody.json()["code"] == "unauthorized"
    wrong = await keyed.as_key("not-a-configured-key-at-all").request(method, path, json=body)
    assert wrong.status_code == 401
    writer = await keyed.as_key(WRITER_A).request(method, path, json=body)
    assert writer.status_code == 403
    assert writer.json()["code"] == "forbidden"
    admin = await keyed.as_key(ADMIN).request(method, path, json=body)
    assert admin.status_code not in (401, 403), admin.text


@pytest.mark.parametrize(("method", "path", "body"), WRITER_ROUTES)
async def test_writer_routes_need_a_writer_key(
    keyed: KeyedApp, method: str, path: str, body: object
) -> None:
    assert (await keyed.as_key(None).request(method, path, json=body)).status_code == 401
    assert (await keyed.as_key(ADMIN).request(method, path, json=body)).status_code == 403
    writer = await keyed.as_key(WRITER_A).request(method, path, json=body)
    assert writer.status_code not in (401, 403), writer.text


async def test_health_and_metrics_need_no_key(keyed: KeyedApp) -> None:
    anyone = keyed.as_key(None)
    assert (await anyone.get("/healthz")).status_code == 200
    assert (await anyone.get("/readyz")).status_code == 200
    assert (await anyone.get("/metrics")).status_code == 200


async def _stream_of(client: httpx.AsyncClient, stream_id: str) -> str:
    gen = await ok(await client.post(f"/v1/streams/{stream_id}/generations"), 201)
    await ok(
        await client.post(
            f"/v1/generations/{gen['generation']}/events",
            json={"events": [{"data": "b-secret-1"}, {"data": "b-secret-2"}]},
        ),
        201,
    )
    token: str = gen["generation"]
    return token


async def test_a_writer_cannot_read_resume_append_or_detect_another_tenant(
    keyed: KeyedApp,
) -> None:
    a, b = keyed.as_key(WRITER_A), keyed.as_key(WRITER_B)
    b_token = await _stream_of(b, "shared.name")
    # Reading: B's stream looks exactly like a stream that does not exist.
    theirs = await a.get("/v1/streams/shared.name")
    nobody = await a.get("/v1/streams/no.such.stream")
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.json()["code"] == nobody.json()["code"] == "unknown_stream"
    paged = await a.get(f"/v1/generations/{b_token}/events")
    assert paged.status_code == 404
    assert paged.json()["code"] == "unknown_generation"
    # Appending: refused as unknown, and nothing lands in B's generation.
    appended = await a.post(
        f"/v1/generations/{b_token}/events", json={"events": [{"data": "intruder"}]}
    )
    assert appended.status_code == 404
    assert appended.json()["code"] == "unknown_generation"
    # Resuming: another tenant's token is `unknown_generation`, on both resume routes.
    for path in ("/v1/streams/shared.name/resume", "/v1/resume"):
        verdict = await ok(await a.post(path, json={"last_event_id": f"{b_token}:1"}))
        assert (verdict["verdict"], verdict["reason"]) == ("invalid", "unknown_generation")
        assert verdict["events"] == []
    # B's own view is untouched.
    mine = await ok(await b.get(f"/v1/generations/{b_token}/events"))
    assert [e["data"] for e in mine["events"]] == ["b-secret-1", "b-secret-2"]


async def test_the_same_stream_id_in_two_tenants_is_two_streams(keyed: KeyedApp) -> None:
    a, b = keyed.as_key(WRITER_A), keyed.as_key(WRITER_B)
    await _stream_of(b, "s1")
    opened = await ok(await a.post("/v1/streams/s1/generations"), 201)
    assert opened["epoch"] == 1  # A's stream does not continue B's
    listing = await ok(await keyed.as_key(ADMIN).get("/admin/v1/streams"))
    assert {(s["stream_id"], s["tenant"]) for s in listing["streams"]} == {("s1", "a"), ("s1", "b")}


async def test_open_service_without_keys(client: httpx.AsyncClient) -> None:
    # No keys: every caller is the one open principal, writer and admin alike.
    assert (await client.post("/v1/streams/s1/generations")).status_code == 201
    assert (await client.get("/admin/v1/stats")).status_code == 200


def test_keyring_compares_digests_and_scopes() -> None:
    digest = hashlib.sha256(b"0123456789abcdef-admin").hexdigest()
    keyring = Keyring(
        [
            KeySpec(scope="writer", tenant="t1", key="0123456789abcdef-writer"),
            KeySpec(scope="admin", key_sha256=digest),
        ]
    )
    writer = keyring.authenticate("Bearer 0123456789abcdef-writer")
    assert (writer.tenant, writer.scopes) == ("t1", frozenset({Scope.WRITER}))
    assert keyring.authenticate("bearer 0123456789abcdef-admin").may(Scope.ADMIN)
    for header in (None, "", "Bearer", "Basic 0123456789abcdef-writer", "Bearer 0123456789"):
        with pytest.raises(Unauthenticated):
            keyring.authenticate(header)
    with pytest.raises(Forbidden):
        Keyring.require(writer, Scope.ADMIN)
    assert Keyring([]).authenticate(None) is OPEN_PRINCIPAL


def test_keys_are_parsed_from_json_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "EVENTLOG_KEYS",
        '[{"scope": "writer", "tenant": "acme", "key": "0123456789abcdef-acme"},'
        ' {"scope": "admin", "key_sha256": "' + "ab" * 32 + '"}]',
    )
    keys = Settings().keys
    assert [(k.scope, k.tenant) for k in keys] == [("writer", "acme"), ("admin", "default")]
    assert "0123456789abcdef-acme" not in repr(keys)  # the key never shows in a repr


@pytest.mark.parametrize(
    "entry",
    [
        '{"scope": "writer"}',
        '{"scope": "writer", "key": "short"}',
        '{"scope": "root", "key": "0123456789abcdef"}',
        '{"scope": "admin", "key": "0123456789abcdef", "key_sha256": "' + "ab" * 32 + '"}',
    ],
)
def test_bad_key_configuration_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    monkeypatch.setenv("EVENTLOG_KEYS", f"[{entry}]")
    with pytest.raises(ValueError, match="validation error"):
        Settings()


@pytest.mark.parametrize(
    "second",
    [
        '{"scope": "writer", "tenant": "other", "key": "0123456789abcdef-acme"}',
        '{"scope": "admin", "key": "0123456789abcdef-acme"}',
        '{"scope": "admin", "key_sha256": "'
        + hashlib.sha256(b"0123456789abcdef-acme").hexdigest()
        + '"}',
    ],
)
def test_one_key_under_two_tenants_or_scopes_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, second: str
) -> None:
    """Before, the last entry won silently; a key now names exactly one tenant and scope."""
    first = '{"scope": "writer", "tenant": "acme", "key": "0123456789abcdef-acme"}'
    monkeypatch.setenv("EVENTLOG_KEYS", f"[{first}, {second}]")
    with pytest.raises(
        ValueError, match=r"EVENTLOG_KEYS\[1\] is the same key as EVENTLOG_KEYS\[0\]"
    ):
        Settings()


def test_the_documented_example_digest_is_not_a_weak_key() -> None:
    """The docs once showed sha256("test"): a key anyone could guess, if copied as is."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    for weak in ("test", "secret", "password", "changeme", "admin", "writer", "key"):
        assert hashlib.sha256(weak.encode()).hexdigest() not in docs
