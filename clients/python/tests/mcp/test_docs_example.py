"""The server example of docs/clients-python.md (and the README) runs as written, against a
service process."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.support.deployment import Deployment
from tests.support.example_call import build_report
from tests.support.processes import REPO, ServerProcess, free_port

pytestmark = pytest.mark.process

DOC = REPO / "docs" / "clients-python.md"


def example() -> str:
    """The first Python block after the heading 'A server in …'."""
    section = DOC.read_text().split("## A server in ", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


def test_the_readme_shows_the_same_example() -> None:
    readme = (REPO / "README.md").read_text().split("## Using it from an MCP server", 1)[1]
    match = re.search(r"```python\n(.*?)```", readme, re.DOTALL)
    assert match is not None
    assert match.group(1) == example()


def test_the_example_is_at_most_15_lines() -> None:
    heading = DOC.read_text().split("## A server in ", 1)[1].split(" ", 1)[0]
    lines = example().strip().splitlines()
    assert len(lines) == int(heading) <= 15


async def test_the_example_serves_and_stores(deployment: Deployment, tmp_path: Path) -> None:
    port = free_port()
    source = example()
    assert "port=8000" in source
    script = tmp_path / "server.py"
    script.write_text(source.replace("port=8000", f"port={port}"))
    env = {"EVENTLOG_URL": deployment.eventlog}
    url = f"http://127.0.0.1:{port}"
    with ServerProcess.program([str(script)], port=port, log_path=tmp_path / "server.log", env=env):
        answer = await build_report(url, pages=3)
    assert answer == ("3 pages", [1, 2, 3])
    async with httpx.AsyncClient(base_url=deployment.eventlog) as admin:
        listed = (await admin.get("/admin/v1/streams", params={"prefix": "mcp."})).json()
    assert len(listed["streams"]) >= 1
