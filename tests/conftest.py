"""Fixtures: every API test runs on SQLite and on PostgreSQL (`backend` is parametrized)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.storage.migrate import upgrade
from tests.support.app import app_client, make_settings
from tests.support.databases import (
    BACKEND_PARAMS,
    backend_database,
    drop_postgres_database,
    empty_postgres,
    require_postgres_database,
)
from tests.support.processes import eventlog_service
from tests.support.soak import soak_enabled
from tests.support.sse import WAIT

# Fixtures of the support modules that more than one folder uses.
pytest_plugins = ["tests.support.browser"]

BACKENDS = ("sqlite", "postgresql")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the PostgreSQL backend, so `-m "not postgresql"` works; skip
    `soak`-marked tests unless the soak flag is set (`EVENTLOG_SOAK=1`, `make soak`)."""
    soak = soak_enabled()
    skip = pytest.mark.skip(reason="long variant: set EVENTLOG_SOAK=1 (or run `make soak`)")
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "postgresql":
            item.add_marker(pytest.mark.postgresql)
        if not soak and item.get_closest_marker("soak") is not None:
            item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `make test` (`-n 2 --dist loadscope`): a module, or a folder that builds a
    shared artifact once, per unit of work (`tests.support.scheduling`)."""
    from tests.support.scheduling import make_scheduler

    return make_scheduler(config, log)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once; each test gets a copy."""
    path = tmp_path_factory.mktemp("template") / "eventlog.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """One migrated PostgreSQL database for the run; tests truncate it before use."""
    url = require_postgres_database()
    try:
        upgrade(url)
        yield url
    finally:
        drop_postgres_database(url)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The database the test runs on."""
    name: str = request.param
    return name


@pytest.fixture
def migrated_database(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path
) -> str:
    """A migrated database of the test's backend (PostgreSQL's may hold earlier tests' rows)."""
    if backend == "sqlite":
        path = tmp_path / "eventlog.db"
        shutil.copyfile(sqlite_template, path)
        return f"sqlite+aiosqlite:///{path}"
    url: str = request.getfixturevalue("postgres_database")
    return url


@pytest.fixture
async def database_url(backend: str, migrated_database: str) -> str:
    """An empty, migrated database of the test's backend."""
    url = migrated_database
    if backend != "sqlite":
        await empty_postgres(url)
    return url


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Default settings on the test's database."""
    return make_settings(database_url)


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client talking to the app in-process, lifespan included."""
    async with app_client(settings) as http:
        yield http


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def base(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a service process for the module, on the backend of the param, with
    the module's `SERVER_ENV` (modules that serve otherwise define their own `base`)."""
    workdir = tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])
    env = getattr(request.module, "SERVER_ENV", {})
    with eventlog_service(backend_database(request, workdir), workdir, env=env) as server:
        yield server


@pytest.fixture
async def http(base: str) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of `base`."""
    async with httpx.AsyncClient(base_url=base, timeout=WAIT) as client:
        yield client
