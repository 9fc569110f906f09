"""The client package stands alone: it installs into a fresh venv without the service's stack."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import REPO

PACKAGE = REPO / "clients" / "python"
SERVICE_ONLY = {"fastapi", "sqlalchemy", "asyncpg", "alembic", "uvicorn", "aiosqlite"}


def test_no_module_of_the_package_imports_the_service() -> None:
    sources = list((PACKAGE / "src" / "mcp_eventlog_client").rglob("*.py"))
    assert len(sources) >= 10
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] != "app", source
            elif isinstance(node, ast.Import):
                assert all(alias.name.split(".")[0] != "app" for alias in node.names), source


def test_the_package_is_versioned_and_typed() -> None:
    pyproject = (PACKAGE / "pyproject.toml").read_text()
    assert 'name = "mcp-eventlog-client"' in pyproject
    assert re.search(r'^version = "\d+\.\d+\.\d+"$', pyproject, re.MULTILINE)
    assert '"mcp==2.3.0"' in pyproject
    assert (PACKAGE / "src" / "mcp_eventlog_client" / "py.typed").exists()


@pytest.mark.process
def test_pip_install_into_a_fresh_venv_brings_only_the_http_client(tmp_path: Path) -> None:
    # A copy: pip builds in the source tree, and the checkout must stay clean.
    source = tmp_path / "src"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    pip = [python, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "--quiet", str(source)], check=True, timeout=300, env=env)
    listed = subprocess.run(
        [*pip, "list", "--format", "json"],
        check=True,
        timeout=60,
        env=env,
        capture_output=True,
        text=True,
    )
    installed = {entry["name"].lower() for entry in json.loads(listed.stdout)}
    assert "mcp-eventlog-client" in installed
    assert {"httpx", "httpx-sse", "sniffio", "websockets"} <= installed  # the append channel
    assert installed & SERVICE_ONLY == set()
    assert "mcp" not in installed  # the SDK only comes with the [mcp] extra
    assert "aiohttp" not in installed  # the fast transport too (the [aiohttp] or [mcp] extra)
    probe = (
        "import importlib.util, mcp_eventlog_client as c; "
        "print(c.Verdict.RESET, c.EventLogClient.__name__, importlib.util.find_spec('app'), "
        "type(c.default_transport()).__name__)"
    )
    run = subprocess.run(
        [python, "-c", probe],
        check=True,
        timeout=60,
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.stdout.split() == ["reset", "EventLogClient", "None", "AsyncHTTPTransport"]
