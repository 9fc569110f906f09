"""One version source per package, and everything that says a version says that one.

- the service: `app.__version__` (pyproject.toml reads it: `dynamic = ["version"]`), said by
  `mcp-eventlog --version`, `/healthz`, `/metrics` (`eventlog_build_info`) and the OpenAPI
  document;
- the Python client: the `version` of clients/python/pyproject.toml;
- the TypeScript package: the `version` of clients/typescript/package.json (and its lock).

The README's table of which versions go together names these three, and CHANGELOG.md has a
section for the service's version.
"""

from __future__ import annotations

import json
import re
import tomllib
from importlib import metadata

import httpx
import pytest

from app import __version__, cli
from tests.release.installed import client_version, npm_version, readme_section
from tests.support.processes import REPO

COMPATIBILITY = "Installing a release"


def compatibility_rows() -> list[list[str]]:
    """The rows of the README's table of versions that go together, header first."""
    section = readme_section(COMPATIBILITY).split("### Which versions go together", 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    rows = [
        [cell.replace("`", "").strip() for cell in line.strip("|").split("|")] for line in lines
    ]
    assert rows, section
    return rows


def minor_series(version: str) -> str:
    """`0.3.0` -> `0.3.x`: what a row of the table names."""
    major, minor, _ = version.split(".", 2)
    return f"{major}.{minor}.x"


def test_the_service_has_one_version_source() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "app.__version__"}
    # The installed metadata (make install) says what the source says.
    assert metadata.version("mcp-eventlog") == __version__


def test_each_client_has_one_version_source() -> None:
    sources = [
        *(REPO / "clients" / "python" / "src").rglob("*.py"),
        *(REPO / "clients" / "typescript" / "src").rglob("*.ts"),
    ]
    for version in {client_version(), npm_version()}:
        copies = [
            path for path in sources if re.search(rf"\b{re.escape(version)}\b", path.read_text())
        ]
        assert copies == [], f"{version} is written again in {copies}"
    lock = json.loads((REPO / "clients" / "typescript" / "package-lock.json").read_text())
    assert lock["version"] == lock["packages"][""]["version"] == npm_version()


def test_the_service_depends_on_the_python_client_of_its_own_version() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    pins = [d for d in project["project"]["dependencies"] if d.startswith("mcp-eventlog-client")]
    assert pins == [f"mcp-eventlog-client=={client_version()}"]
    assert client_version() == __version__
    assert metadata.version("mcp-eventlog-client") == client_version()  # make install


def test_the_readme_says_which_versions_go_together() -> None:
    header, current, *_older = compatibility_rows()
    assert header[:3] == [
        "service mcp-eventlog",
        "Python client mcp-eventlog-client",
        "TypeScript package mcp-eventlog",
    ]
    assert current[:3] == [
        minor_series(__version__),
        minor_series(client_version()),
        minor_series(npm_version()),
    ]


def test_the_changelog_has_a_section_for_this_release() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(__version__)}\]", changelog, re.MULTILINE)


def test_the_command_line_says_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"mcp-eventlog {__version__}"


async def test_healthz_metrics_and_the_api_document_say_the_version(
    client: httpx.AsyncClient,
) -> None:
    alive = await client.get("/healthz")
    assert alive.json() == {"status": "ok", "version": __version__}
    metrics = (await client.get("/metrics")).text
    assert f'eventlog_build_info{{version="{__version__}"}} 1.0' in metrics
    assert (await client.get("/openapi.json")).json()["info"]["version"] == __version__
