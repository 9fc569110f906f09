"""The release, built once per test run and installed once per artifact (see installed.py).

Every folder is under pytest's temporary directory, outside the repository.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.release.installed import (
    Release,
    build_release,
    fresh_npm_project,
    fresh_virtualenv,
)


@dataclass(frozen=True)
class Installed:
    """Each artifact installed as a user would, each in a place of its own."""

    service_python: Path  # a virtual environment holding the service's wheel (and the
    # Python client's, which the service depends on, without `[mcp]`)
    client_python: Path  # another, holding the Python client's wheel with `[mcp]`
    npm_project: Path  # an npm project that installed the tarball and the MCP SDK


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """`make dist` into a temporary folder, once for the whole run."""
    return build_release(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def installed(release: Release, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The three installs, at once: they are independent, and mostly wait on I/O."""
    with ThreadPoolExecutor(3) as pool:
        service = pool.submit(
            fresh_virtualenv,
            tmp_path_factory.mktemp("service-user") / "venv",
            str(release.service_wheel),
            str(release.client_wheel),
        )
        client = pool.submit(
            fresh_virtualenv,
            tmp_path_factory.mktemp("client-user") / "venv",
            f"{release.client_wheel}[mcp]",
        )
        npm = pool.submit(fresh_npm_project, tmp_path_factory.mktemp("npm-user"), release)
        return Installed(service.result(), client.result(), npm.result())


@pytest.fixture(scope="session")
def service_python(installed: Installed) -> Path:
    """The python of the service's environment."""
    return installed.service_python


@pytest.fixture(scope="session")
def client_python(installed: Installed) -> Path:
    """The python of the Python client's environment."""
    return installed.client_python


@pytest.fixture(scope="session")
def npm_project(installed: Installed) -> Path:
    """The npm project holding the TypeScript package."""
    return installed.npm_project
