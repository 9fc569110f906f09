"""`mcp-eventlog admin …` and `gc`: each command against the app, tables and JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from app import __version__
from app.admin_cli import render_stream
from app.cli import _parser, main
from tests.support.operators import (
    WRITER_A,
    KeyedApp,
    keyed_app,
    leave_logging_alone,
    ok,
)
from tests.support.operators import admin_cli as run
from tests.support.processes import REPO, free_port

_leave_logging_alone = pytest.fixture(leave_logging_alone, autouse=True)
keyed = pytest.fixture(keyed_app, name="keyed")


@pytest.fixture
async def reset_story(keyed: KeyedApp) -> tuple[str, str]:
    """A stream whose first generation was superseded after two events; one resume."""
    writer = keyed.as_key(WRITER_A)
    tokens = []
    for data in (["a", "b"], ["c"]):
        gen = await ok(await writer.post("/v1/streams/sess-1.req-7/generations"), 201)
        events = {"events": [{"data": d} for d in data]}
        await ok(await writer.post(f"/v1/generations/{gen['generation']}/events", json=events), 201)
        tokens.append(gen["generation"])
    claim = {"last_event_id": f"{tokens[0]}:2"}
    await ok(await writer.post("/v1/streams/sess-1.req-7/resume", json=claim))
    return tokens[0], tokens[1]


async def test_streams(keyed: KeyedApp, reset_story: tuple[str, str]) -> None:
    text = await run(keyed, "streams")
    header, _, row = text.splitlines()
    assert header.split()[:7] == ["STREAM", "TENANT", "GENS", "CURRENT", "STATE", "HEAD", "TAIL"]
    assert row.split()[:7] == ["sess-1.req-7", "a", "2", reset_story[1], "live", "1", "1"]
    text = await run(keyed, "--json", "streams", "--prefix", "nothing")
    assert json.loads(text) == {"streams": [], "next_cursor": None}


async def test_stream(keyed: KeyedApp, reset_story: tuple[str, str]) -> None:
    text = await run(keyed, "stream", "sess-1.req-7")
    lines = text.splitlines()
    assert lines[0] == "stream sess-1.req-7 (tenant a)"
    assert lines[3].split()[:4] == ["1", reset_story[0], "superseded", "initial"]
    assert lines[4].split()[:4] == ["2", reset_story[1], "live", "reset"]


def test_an_id_that_begins_with_a_dash_is_given_after_double_dash() -> None:
    args = _parser().parse_args(["admin", "explain", "--", "s", "-Zx9:4"])
    assert (args.stream_id, args.last_event_id) == ("s", "-Zx9:4")


async def test_explain_a_reset(keyed: KeyedApp, reset_story: tuple[str, str]) -> None:
    old, new = reset_story
    # '--': a token can begin with '-' (about one in 64), which argparse takes for an option.
    text = await run(keyed, "explain", "--", "sess-1.req-7", f"{old}:2")
    lines = text.splitlines()
    assert lines[0].startswith("reset / superseded: ")
    assert lines[-1] == f"would deliver: 1 event of {new} after seq 0"
    matched = [line for line in lines if line.rstrip().endswith("MATCH")]
    assert len(matched) == 1
    assert matched[0].split()[0] == "5"
    text = await run(keyed, "--json", "explain", "--", "sess-1.req-7", f"{old}:2")
    assert json.loads(text)["reason"] == "superseded"


async def test_stats_and_decisions(keyed: KeyedApp, reset_story: tuple[str, str]) -> None:
    text = await run(keyed, "stats")
    assert "live 1, terminal 0, superseded 1, abandoned 0, expired 0" in text
    assert text.splitlines()[-1].split() == ["reset", "superseded", "1"]
    text = await run(keyed, "decisions", "--verdict", "reset")
    row = text.splitlines()[-1].split()
    assert row[3:8] == [
        "sess-1.req-7",
        f"{reset_story[0]}:2",
        "reset",
        "superseded",
        reset_story[1],
    ]
    text = await run(keyed, "--json", "decisions", "--stream", "other")
    assert json.loads(text) == {"decisions": []}


async def test_refusals_exit_non_zero(keyed: KeyedApp, capsys: pytest.CaptureFixture[str]) -> None:
    await run(keyed, "stream", "no-such-stream", expect=1)
    assert "404 unknown_stream" in capsys.readouterr().err
    await run(keyed, "stats", key=WRITER_A, expect=1)
    assert "403 forbidden" in capsys.readouterr().err


def test_url_and_key_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTLOG_URL", "http://ops.example:9000")
    monkeypatch.setenv("EVENTLOG_ADMIN_KEY", "k" * 20)
    args: argparse.Namespace = _parser().parse_args(["admin", "stats"])
    assert (args.url, args.key) == ("http://ops.example:9000", "k" * 20)
    flags = _parser().parse_args(["admin", "--url", "http://x", "--key", "y", "stats"])
    assert (flags.url, flags.key) == ("http://x", "y")


def test_unreachable_service(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code = main(["admin", "--url", url, "stats"])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot reach the service at {url}: ")
    assert "error: 0" not in err


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\u202egnp.exe"


async def test_hostile_values_reach_the_terminal_escaped(keyed: KeyedApp) -> None:
    """A Last-Event-ID is the client's own text; the decision log keeps it as evidence, and
    the CLI shows it without letting the terminal act on an escape or a bidi override."""
    writer = keyed.as_key(WRITER_A)
    await ok(await writer.post("/v1/streams/s1/generations"), 201)
    await ok(await writer.post("/v1/streams/s1/resume", json={"last_event_id": HOSTILE}))
    text = await run(keyed, "decisions")
    assert not set(text) & {"\x1b", "\x07", "\u202e"}
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\u202egnp.exe" in text
    explained = await run(keyed, "explain", "s1", HOSTILE)
    assert not set(explained) & {"\x1b", "\x07", "\u202e"}


def test_renderers_escape_every_value() -> None:
    """Values stored before the service refused them (a producer) are shown escaped too."""
    generation = {
        "epoch": 1,
        "generation": "tok",
        "expired": False,
        "terminal": False,
        "superseded": False,
        "reason": "initial",
        "producer": "evil\x1b[31m\u202e",
        "head_seq": 1,
        "tail_seq": 0,
        "terminal_seq": None,
        "retained_events": 1,
        "retained_bytes": 1,
        "last_append_at": "2026-11-30T12:00:00+00:00",
    }
    text = render_stream({"stream_id": "s\x1b", "tenant": "t\n", "generations": [generation]})
    assert not set(text) & {"\x1b", "\u202e"}
    assert text.splitlines()[0] == "stream s\\x1b (tenant t\\n)"
    assert "evil\\x1b[31m\\u202e" in text


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"mcp-eventlog {__version__}"


SECRET = "0123456789abcdef-very-secret"


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ("[", "EVENTLOG_KEYS: is not a JSON list"),
        ('[{"scope": "writer"}]', "EVENTLOG_KEYS[0]: give exactly one of key or key_sha256"),
        ('[{"scope": "writer", "key": "short"}]', "EVENTLOG_KEYS[0].key: String should have"),
        ('[{"scope": "root", "key": "' + SECRET + '"}]', "EVENTLOG_KEYS[0].scope: Input should"),
        (
            '[{"scope": "writer", "tenant": "a", "key": "' + SECRET + '"},'
            ' {"scope": "admin", "key": "' + SECRET + '"}]',
            "EVENTLOG_KEYS[1] is the same key as EVENTLOG_KEYS[0]",
        ),
    ],
)
def test_bad_keys_are_one_line_naming_the_entry(
    keys: str, expected: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVENTLOG_KEYS", keys)

    def served(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("serve started with a bad EVENTLOG_KEYS")

    # Were the keys accepted, `serve` would run a server for good: fail at once instead.
    monkeypatch.setattr(uvicorn, "run", served)
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("mcp-eventlog: configuration error: " + expected), err
    assert SECRET not in err
    assert "Traceback" not in err


@pytest.mark.parametrize("backend", ["sqlite"])
def test_migrate_and_gc_need_no_valid_keys(
    migrated_database: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVENTLOG_DATABASE_URL", migrated_database)
    monkeypatch.setenv("EVENTLOG_KEYS", '[{"scope": "writer", "key": "short"}, {"broken": ')
    assert main(["migrate"]) == 0
    assert main(["gc"]) == 0
    assert json.loads(capsys.readouterr().out)["ran"] is True


@pytest.mark.parametrize("backend", ["sqlite"])
def test_gc_runs_one_pass(
    migrated_database: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVENTLOG_DATABASE_URL", migrated_database)
    assert main(["gc"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert report == {
        "ran": True,
        "expired": 0,
        "capped": 0,
        "purged_events": 0,
        "deleted_tombstones": 0,
        "deleted_streams": 0,
        "trimmed_decisions": 0,
    }


@pytest.mark.process
def test_serve_refuses_a_public_address_without_keys(tmp_path: Path, sqlite_template: Path) -> None:
    shutil.copyfile(sqlite_template, tmp_path / "eventlog.db")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    env["EVENTLOG_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'eventlog.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "refusing to serve on 0.0.0.0: no keys are configured" in done.stderr


async def test_an_abandoned_generation_is_shown_as_such(keyed: KeyedApp) -> None:
    writer = keyed.as_key(WRITER_A)
    body = {"lease_seconds": 1}
    gen = await ok(await writer.post("/v1/streams/gone/generations", json=body), 201)
    events = {"events": [{"data": "a"}]}
    await ok(await writer.post(f"/v1/generations/{gen['generation']}/events", json=events), 201)
    await asyncio.sleep(1.2)
    await keyed.app.state.api.container.leases.sweep_once()
    lines = (await run(keyed, "stream", "gone")).splitlines()
    assert lines[3].split()[:3] == ["1", gen["generation"], "abandoned"]
    text = await run(keyed, "explain", "--", "gone", f"{gen['generation']}:1")
    assert text.startswith("reset / abandoned:")
    assert "abandoned at " in text
    assert "live 0, terminal 0, superseded 0, abandoned 1, expired 0" in await run(keyed, "stats")


OPERATIONS = REPO / "docs" / "operations.md"
# The tokens the worked example of docs/operations.md shows, for the generations of a run.
DOC_TOKENS = ("Zpfco2VjhosXwry43KUXJg", "9WbsR6ORI5E9PzmwFdbD0w")


def _documented(command: str) -> str:
    """What docs/operations.md shows `command` printing (its console block, to the blank
    line before the next prompt)."""
    text = OPERATIONS.read_text()
    start = text.index(f"$ {command}\n") + len(f"$ {command}\n")
    end = min(i for i in (text.find("\n\n$ ", start), text.find("\n```", start)) if i != -1)
    return text[start:end]


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_the_operations_page_shows_what_explain_prints(keyed: KeyedApp) -> None:
    """The worked example's `explain`, run on the same story (two events, then a new
    generation opened with reason `retry`), prints what the page shows (tokens and tenant
    are the run's)."""
    writer = keyed.as_key(WRITER_A)
    first = await ok(await writer.post("/v1/streams/sess-1.req-7/generations"), 201)
    events = {"events": [{"data": "a"}, {"data": "b"}]}
    await ok(await writer.post(f"/v1/generations/{first['generation']}/events", json=events), 201)
    retry = {"reason": "retry"}
    second = await ok(await writer.post("/v1/streams/sess-1.req-7/generations", json=retry), 201)
    printed = await run(keyed, "explain", "sess-1.req-7", f"{first['generation']}:2")
    for token, shown in zip((first["generation"], second["generation"]), DOC_TOKENS, strict=True):
        printed = printed.replace(token, shown)
    printed = printed.replace("(tenant a)", "(tenant default)")
    command = f"mcp-eventlog admin explain sess-1.req-7 {DOC_TOKENS[0]}:2"
    assert _documented(command) == printed.rstrip("\n")
