"""The deployment the end-to-end tests run against: service and MCP server as processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.databases import BACKEND_PARAMS, backend_database
from tests.support.deployment import Deployment
from tests.support.processes import eventlog_service, mcp_server


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """The service (on the backend of the param) and the test MCP server, as processes."""
    workdir = tmp_path_factory.mktemp("e2e")
    database_url = backend_database(request, workdir)
    with eventlog_service(database_url, workdir) as eventlog, mcp_server(eventlog, workdir) as url:
        yield Deployment(eventlog, url)
