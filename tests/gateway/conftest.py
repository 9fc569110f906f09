"""The gateway's tests: real processes — the official Python SDK server as the upstream
(no event store), the gateway (`python -m app gateway`), the official Python client — on
SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.databases import BACKEND_PARAMS, backend_database
from tests.support.gateway import gateway_process, python_upstream
from tests.support.processes import ServerProcess


@dataclass(frozen=True)
class Pair:
    """An upstream and the gateway in front of it."""

    upstream: ServerProcess
    gateway: ServerProcess
    database_url: str
    workdir: Path

    @property
    def mcp(self) -> str:
        """The gateway's MCP endpoint."""
        return f"{self.gateway.base_url}/mcp"


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pair]:
    """One upstream and one gateway for the module, on the backend of the param."""
    workdir = tmp_path_factory.mktemp("gateway")
    database_url = backend_database(request, workdir)
    with (
        python_upstream(workdir) as upstream,
        gateway_process(f"{upstream.base_url}/mcp", database_url, workdir) as gateway,
    ):
        yield Pair(upstream, gateway, database_url, workdir)
