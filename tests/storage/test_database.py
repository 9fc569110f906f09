"""The database picks each database's hooks by its URL, and keeps what it learns to itself."""

from __future__ import annotations

import pytest

from app.settings import Settings
from app.storage.database import dialect_for
from app.storage.postgres import DirectTransactions, PostgresDialect
from app.storage.sqlite import SqliteDialect
from app.storage.wakeups import LocalCommits


def test_each_database_gets_its_write_path() -> None:
    assert isinstance(dialect_for("sqlite+aiosqlite:///x.db"), SqliteDialect)
    postgres = dialect_for("postgresql+asyncpg://nobody@127.0.0.1/none")
    assert isinstance(postgres, PostgresDialect)
    settings = Settings(database_url="postgresql+asyncpg://nobody@127.0.0.1/none")
    engines = postgres.engines(settings)
    assert isinstance(postgres.transactions(settings, engines, LocalCommits()), DirectTransactions)
    with pytest.raises(ValueError, match="unsupported"):
        dialect_for("mysql+aiomysql://nobody@127.0.0.1/none")
