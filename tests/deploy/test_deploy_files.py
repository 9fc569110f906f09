"""deploy/nginx/eventlog.conf and deploy/compose.yaml agree with the service they front:
the proxy's timeouts are longer than the service's heartbeat, long-poll and body timeout
(read from the settings' defaults), its body limit is the service's and its refusal the
service's own problem, the live route is unbuffered, the append channel's location
upgrades, and the compose file wires PostgreSQL, the migrate job, two replicas and nginx
with that configuration. (tests/deploy/test_nginx.py runs the same file for real.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import yaml

from app.api.app import create_app
from app.settings import Settings
from tests.support.processes import REPO

DEPLOY = REPO / "deploy"
CONFIG = (DEPLOY / "nginx" / "eventlog.conf").read_text()
DEFAULTS = Settings(keys=())
UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


QUOTED: list[str] = []  # quoted strings, taken out so that their braces are not blocks


def without_comments(text: str) -> str:
    """The text without comments; each quoted string replaced by a placeholder."""

    def hide(match: re.Match[str]) -> str:
        QUOTED.append(match.group(0))
        return f"\x00{len(QUOTED) - 1}\x00"

    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    return re.sub(r"'[^']*'|\"[^\"]*\"", hide, text)


def shown(text: str) -> str:
    return re.sub(r"\x00(\d+)\x00", lambda m: QUOTED[int(m.group(1))], text)


def block(head: str) -> str:
    """The body of the block that opens with `head {` (its nested blocks included)."""
    text = without_comments(CONFIG)
    start = text.index(head + " {") + len(head) + 2
    depth, at = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(text[at], 0)
        at += 1
    return text[start : at - 1]


def directives(text: str, name: str) -> list[str]:
    """The arguments of every `name …;` in `text` at its own level (nested blocks left out)."""
    flat = re.sub(r"\{[^{}]*\}", "", text)
    while "{" in flat:
        flat = re.sub(r"\{[^{}]*\}", "", flat)
    found = re.finditer(rf"(?:^|\s){name}\s+([^;]*);", flat)
    return [shown(m.group(1).strip()) for m in found]


def one(text: str, name: str) -> str:
    [value] = directives(text, name)
    return value


def parts(pattern: str, text: str) -> tuple[str, ...]:
    """The groups of `pattern` matching the whole of `text` (an error when it does not)."""
    match = re.fullmatch(pattern, text)
    assert match is not None, f"{text!r} is not {pattern}"
    return match.groups()


def seconds(value: str) -> float:
    number, unit = parts(r"(\d+)([smh]?)", value)
    return int(number) * SECONDS[unit]


def size(value: str) -> int:
    number, unit = parts(r"(\d+)([kmg]?)", value.lower())
    return int(number) * UNITS[unit]


SERVER = block("server")
LIVE = block(r"location ~ ^/v1/(streams|tasks)/[^/]+/live$")
CHANNEL = block("location = /v1/append")


def test_the_read_timeout_outlasts_the_heartbeat_and_the_longest_long_poll() -> None:
    read = seconds(one(SERVER, "proxy_read_timeout"))
    assert read > DEFAULTS.live_heartbeat_seconds
    assert read > DEFAULTS.live_max_wait_seconds
    # The live location inherits it (or says a longer one).
    for value in directives(LIVE, "proxy_read_timeout"):
        assert seconds(value) > DEFAULTS.live_heartbeat_seconds


def test_the_service_judges_bodies_in_time_and_size() -> None:
    assert seconds(one(SERVER, "client_body_timeout")) > DEFAULTS.body_timeout_seconds
    assert one(SERVER, "proxy_request_buffering") == "off"
    assert size(one(SERVER, "client_max_body_size")) == DEFAULTS.max_body_bytes


async def test_the_proxys_413_is_the_services_own_problem(tmp_path: Path) -> None:
    assert one(SERVER, "error_page") == "413 @body_too_large"
    refusal = block("location @body_too_large")
    assert one(refusal, "default_type") == "application/problem+json"
    status, body = parts(r"(\d+) '(.*)'", one(refusal, "return"))
    app = create_app(Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", keys=()))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        answer = await http.post(
            "/v1/streams/s/generations",
            content=b"x" * (DEFAULTS.max_body_bytes + 1),
            headers={"content-type": "application/json"},
        )
    assert (int(status), json.loads(body)) == (answer.status_code, answer.json())


def test_every_live_route_is_unbuffered() -> None:
    assert one(LIVE, "proxy_buffering") == "off"
    assert one(LIVE, "gzip") == "off"
    pattern = re.compile(r"^/v1/(streams|tasks)/[^/]+/live$")
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:", keys=()))
    live = [path for path in app.openapi()["paths"] if path.endswith("/live")]
    assert live == ["/v1/streams/{stream_id}/live", "/v1/tasks/{task_id}/live"]
    examples = {"{stream_id}": "sess-1.req-7", "{task_id}": "u2Fq0cT9bX1wYd7eKkP3rA"}
    for path in live:
        for name, value in examples.items():
            path = path.replace(name, value)
        assert pattern.match(path), path


def test_requests_reach_the_replicas_as_the_client_sent_them() -> None:
    assert one(SERVER, "proxy_http_version") == "1.1"
    headers = dict(value.split(None, 1) for value in directives(SERVER, "proxy_set_header"))
    # The service checks Host and compares Origin with it: the client's, port and all.
    assert headers["Host"] == "$http_host"
    assert headers["Connection"] == '""'  # keep-alive to the replicas
    assert re.search(r"(?m)^\s*least_conn;", block("upstream eventlog"))  # long connections


def test_the_append_channel_location_upgrades() -> None:
    # GET /v1/append itself is exercised through nginx by test_nginx.py.
    headers = dict(value.split(None, 1) for value in directives(CHANNEL, "proxy_set_header"))
    assert headers["Upgrade"] == "$http_upgrade"
    assert headers["Connection"] == "$connection_upgrade"
    # proxy_set_header in a location replaces the server's list: it must repeat it whole.
    server_headers = dict(value.split(None, 1) for value in directives(SERVER, "proxy_set_header"))
    assert set(server_headers) - {"Connection"} <= set(headers)
    read = seconds(one(CHANNEL, "proxy_read_timeout"))
    assert read > DEFAULTS.channel_idle_seconds, "the service must close an idle channel first"
    assert read >= seconds(one(SERVER, "proxy_read_timeout"))


def test_the_compose_file_runs_postgresql_a_migrate_job_two_replicas_and_nginx() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "migrate", "replica-a", "replica-b", "nginx"}
    assert services["migrate"]["command"] == ["mcp-eventlog", "migrate"]
    for name in ("replica-a", "replica-b"):
        replica = services[name]
        assert replica["image"] == services["migrate"]["image"] == "mcp-eventlog"  # make docker
        assert replica["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert "EVENTLOG_KEYS" in replica["environment"]  # it listens on 0.0.0.0
    nginx = services["nginx"]
    assert "./nginx/eventlog.conf:/etc/nginx/conf.d/default.conf:ro" in nginx["volumes"]
    assert "./nginx/eventlog.d:/etc/nginx/eventlog.d:ro" in nginx["volumes"]
    for name in ("replica-a", "replica-b"):
        assert nginx["depends_on"][name]["condition"] == "service_healthy"
    # The replicas nginx balances are the compose file's, on the image's port.
    [port] = re.findall(r"EVENTLOG_PORT=(\d+)", (REPO / "Dockerfile").read_text())
    replicas = (DEPLOY / "nginx" / "eventlog.d" / "replicas.conf").read_text()
    assert directives(without_comments(replicas), "server") == [
        f"replica-a:{port}",
        f"replica-b:{port}",
    ]
    listen = one(
        without_comments((DEPLOY / "nginx" / "eventlog.d" / "listen.conf").read_text()), "listen"
    )
    assert nginx["ports"] == [f"127.0.0.1:{listen}:{listen}"]


def test_the_operations_page_shows_the_configuration_and_explains_each_directive() -> None:
    page = (REPO / "docs" / "operations.md").read_text()
    section = page.split("### Replicas behind nginx", 1)[1].split("\n## ", 1)[0]
    shown = section.split("```nginx\n", 1)[1].split("```", 1)[0]
    assert shown == CONFIG
    explained = section.split("Line by line:", 1)[1]
    used = set(re.findall(r"(?m)^\s*([a-z_]+)\s", without_comments(CONFIG)))
    missing = sorted(name for name in used if f"`{name}" not in explained)
    assert missing == [], f"docs/operations.md does not explain {missing}"
