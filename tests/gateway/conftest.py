"""The gateway's tests: real processes — the official Python SDK server as the upstream
(no event store), the gateway (`python -m app gateway`), the official Python client — on
SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.databases import BACKEND_PARAMS, backend_database
from tests.support.gateway import (
    gateway_before,
    python_upstream_process,
)
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


def pair_fixture(upstream: Callable[[Path], ServerProcess], folder: str) -> Any:
    """A module's fixture, on each backend (its params): `upstream(workdir)` (a process not
    yet started) and a gateway in front of it, both running for the module, in a new
    temporary folder named after `folder`."""

    @pytest.fixture(scope="module", params=BACKEND_PARAMS)
    def pair(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Pair]:
        """The upstream and the gateway in front of it, running for the module."""
        workdir = tmp_path_factory.mktemp(folder)
        database_url = backend_database(request, workdir)
        process = upstream(workdir)
        with gateway_before(process, workdir, database_url) as gateway:
            yield Pair(process, gateway, database_url, workdir)

    return pair


# One upstream (the official Python SDK server) and one gateway for the module.
pair = pair_fixture(python_upstream_process, "gateway")


@pytest.fixture(params=BACKEND_PARAMS)
def gateway_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database of the param's backend for one test's own gateway."""
    return backend_database(request, tmp_path)
