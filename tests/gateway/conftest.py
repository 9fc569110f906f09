"""The gateway's tests: real processes — the official Python SDK server as the upstream
(no event store), the gateway (`python -m app gateway`), the official Python client — on
SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pair]:
    """One upstream and one gateway for the module, on the backend of the param."""
    with pair_before(python_upstream_process, request, tmp_path_factory.mktemp("gateway")) as up:
        yield up


@contextmanager
def pair_before(
    upstream: Callable[[Path], ServerProcess], request: pytest.FixtureRequest, workdir: Path
) -> Iterator[Pair]:
    """`upstream(workdir)` (a process not yet started) and a gateway in front of it, on the
    backend of the fixture's param, both running for the block."""
    database_url = backend_database(request, workdir)
    process = upstream(workdir)
    with gateway_before(process, workdir, database_url) as gateway:
        yield Pair(process, gateway, database_url, workdir)


@pytest.fixture(params=BACKEND_PARAMS)
def gateway_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database of the param's backend for one test's own gateway."""
    return backend_database(request, tmp_path)
