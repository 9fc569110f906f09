"""The release installed as a user would, outside the repository.

`make dist` builds the artifacts once for the run (conftest.py); each goes into an
environment of its own in a temporary folder: the service's wheel into a fresh virtual
environment, the Python client's wheel (with `[mcp]`) into another, the npm tarball into a
fresh npm project. Then the installed service's own console script, run in a temporary
folder, migrates and serves a fresh SQLite file (its default, `./eventlog.db`) and a fresh
PostgreSQL database of its own, answers the README's tour (the README's own curl lines,
run by bash), and the README's two server examples, Python and TypeScript, run from the
installed client packages against it and store their streams there.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from app import __version__
from tests.release.installed import (
    Release,
    client_version,
    first_block,
    installed_service,
    npm_version,
    readme_section,
    run,
    running,
)
from tests.support.databases import (
    drop_postgres_database,
    require_postgres_database,
)
from tests.support.example_call import build_report
from tests.support.processes import REPO, free_port

pytestmark = pytest.mark.process

TOUR = "A tour of the API"
EXAMPLES = "Using it from an MCP server"


@dataclass(frozen=True)
class Served:
    """The installed service serving one database from a user's folder."""

    url: str
    database_url: str
    folder: Path
    python: Path

    def command(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run `mcp-eventlog <args>` of the installed service on its database."""
        script = str(self.python.parent / "mcp-eventlog")
        return run([script, *args], self.folder, EVENTLOG_DATABASE_URL=self.database_url)


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)],
)
def served(
    request: pytest.FixtureRequest,
    service_python: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    """The installed service on a fresh database of the param's kind."""
    folder = tmp_path_factory.mktemp(f"user-{request.param}")
    if request.param == "sqlite":
        # Nothing configured: the default file in the working directory, which `serve`
        # migrates itself on SQLite.
        with installed_service(service_python, folder) as url:
            assert (folder / "eventlog.db").is_file()
            yield Served(
                url, f"sqlite+aiosqlite:///{folder / 'eventlog.db'}", folder, service_python
            )
        return
    database_url = require_postgres_database()
    try:
        served = Served("", database_url, folder, service_python)
        migrated = served.command("migrate")  # on PostgreSQL an explicit step, once
        assert migrated.returncode == 0, migrated.stderr
        assert "schema is at the newest migration" in migrated.stderr
        with installed_service(service_python, folder, EVENTLOG_DATABASE_URL=database_url) as url:
            yield Served(url, database_url, folder, service_python)
    finally:
        drop_postgres_database(database_url)


def test_the_artifacts_carry_the_versions_of_their_sources(release: Release) -> None:
    assert release.service_wheel.name == f"mcp_eventlog-{__version__}-py3-none-any.whl"
    assert release.only("mcp_eventlog-*.tar.gz").name == f"mcp_eventlog-{__version__}.tar.gz"
    assert release.client_wheel.name == f"mcp_eventlog_client-{client_version()}-py3-none-any.whl"
    assert release.only("mcp_eventlog_client-*.tar.gz").name.endswith(f"-{client_version()}.tar.gz")
    assert release.npm_tarball.name == f"mcp-eventlog-{npm_version()}.tgz"


def test_the_readme_names_the_artifacts_as_built(release: Release) -> None:
    section = readme_section("Installing a release")
    built = sorted(path.name for path in release.folder.iterdir())
    assert len(built) == 5
    for name in built:
        assert f"`{name}`" in section or f"dist/{name}" in section, name
    client_readme = (REPO / "clients" / "python" / "README.md").read_text()
    assert release.client_wheel.name in client_readme


def test_the_service_runs_from_its_environment_not_the_checkout(
    service_python: Path, tmp_path: Path
) -> None:
    where = run([str(service_python), "-c", "import app; print(app.__file__)"], tmp_path)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(service_python.parent.parent)
    version = run([str(service_python.parent / "mcp-eventlog"), "--version"], tmp_path)
    assert version.stdout.strip() == f"mcp-eventlog {__version__}"


def test_the_service_runs_its_gateway_without_the_mcp_sdk(
    service_python: Path, tmp_path: Path
) -> None:
    """The gateway's storage convention comes from the client package's module that is free
    of the MCP SDK; the service's environment has no SDK at all."""
    probe = "import importlib.util, app.gateway.app; print(importlib.util.find_spec('mcp'))"
    done = run([str(service_python), "-c", probe], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"


def json_documents(text: str) -> list[Any]:
    """The JSON documents printed one after another (curl prints no newline after each)."""
    decoder, documents, at = json.JSONDecoder(), [], 0
    while (at := _skip_space(text, at)) < len(text):
        document, at = decoder.raw_decode(text, at)
        documents.append(document)
    return documents


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def test_the_readme_tour_runs_as_written(served: Served) -> None:
    block = first_block(readme_section(TOUR), "sh")
    # The README's own lines, run by bash with curl and jq, against this service.
    assert block.startswith("B=http://127.0.0.1:8080\n")
    for line in (
        "curl -s -XPOST $B/v1/streams/sess-1.req-7/generations",
        "curl -s -XPOST $B/v1/generations/$G/events",
        "curl -s -XPOST $B/v1/streams/sess-1.req-7/resume",
    ):
        assert line in block
    script = block.replace("http://127.0.0.1:8080", served.url, 1)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=served.folder,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    appended, decided = json_documents(done.stdout)
    [event_id] = appended["event_ids"]
    token, seq = event_id.rsplit(":", 1)
    assert seq == "1"
    assert (decided["verdict"], decided["reason"]) == ("resume", "ok")
    stream = httpx.get(f"{served.url}/v1/streams/sess-1.req-7").json()
    assert stream["current"]["generation"] == token


def test_the_service_says_its_version(served: Served) -> None:
    assert httpx.get(f"{served.url}/healthz").json() == {"status": "ok", "version": __version__}
    metrics = httpx.get(f"{served.url}/metrics").text
    assert f'eventlog_build_info{{version="{__version__}"}} 1.0' in metrics
    assert httpx.get(f"{served.url}/readyz").status_code == 200  # the schema is the newest


def test_the_api_docs_come_from_the_service(served: Served) -> None:
    page = httpx.get(f"{served.url}/docs").text
    assets = [part.split('"', 1)[0] for part in page.split('src="')[1:] + page.split('href="')[1:]]
    assert assets, page
    for asset in assets:
        assert asset.startswith("/"), f"/docs loads {asset} from elsewhere"
        assert httpx.get(f"{served.url}{asset}").status_code == 200, asset


def test_gc_and_admin_run_from_the_installed_package(served: Served) -> None:
    collected = served.command("gc")
    assert collected.returncode == 0, collected.stderr
    assert {"ran", "expired", "purged_events"} <= set(json.loads(collected.stdout))
    stats = served.command("admin", "--url", served.url, "--json", "stats")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["streams"] >= 1


async def mcp_session(url: str) -> types.InitializeResult:
    """Open an MCP session with the official Python SDK's client, and ping it."""
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        initialized = await session.initialize()
        await session.send_ping()
        return initialized


def mcp_streams(served: Served) -> int:
    """How many streams the MCP stores have made in the service."""
    listed = httpx.get(f"{served.url}/admin/v1/streams", params={"prefix": "mcp."}).json()
    return len(listed["streams"])


# The examples exercise the installed clients; the service's database is the tour's
# concern, so they run once, against the SQLite instance (the CI budget is tight).
ONCE = pytest.mark.parametrize("served", ["sqlite"], indirect=True)


@ONCE
async def test_the_python_example_runs_from_the_installed_client(
    served: Served, client_python: Path, tmp_path: Path
) -> None:
    source = first_block(readme_section(EXAMPLES), "python")
    assert "port=8000" in source
    port = free_port()
    script = tmp_path / "server.py"
    script.write_text(source.replace("port=8000", f"port={port}"))
    url = f"http://127.0.0.1:{port}"
    before = mcp_streams(served)
    example = [str(client_python), str(script)]
    with running(example, tmp_path, url, any_answer=True, EVENTLOG_URL=served.url):
        answer = await build_report(url, pages=3)
    assert answer == ("3 pages", [1, 2, 3])
    assert mcp_streams(served) > before


@ONCE
async def test_the_typescript_example_runs_from_the_installed_tarball(
    served: Served, npm_project: Path
) -> None:
    source = first_block(readme_section(EXAMPLES), "js")
    assert "listen(8000)" in source
    assert '"http://127.0.0.1:8080"' in source
    port = free_port()
    script = npm_project / f"server-{port}.mjs"
    script.write_text(
        source.replace("listen(8000)", f"listen({port})").replace(
            "http://127.0.0.1:8080", served.url
        )
    )
    url = f"http://127.0.0.1:{port}"
    before = mcp_streams(served)
    with running(["node", str(script)], npm_project, url, any_answer=True):
        initialized = await mcp_session(url)
    assert initialized.server_info.name == "reports"
    assert mcp_streams(served) > before
