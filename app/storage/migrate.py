"""Running the alembic migrations from code (the CLI, the tests, `/readyz`)."""

from __future__ import annotations

import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

_REPO = Path(__file__).resolve().parents[2]


def migrations_dir() -> Path:
    """Where the migrations are: `EVENTLOG_MIGRATIONS_DIR`, else `migrations/` of the source."""
    return Path(os.environ.get("EVENTLOG_MIGRATIONS_DIR", _REPO / "migrations"))


def alembic_config(database_url: str) -> Config:
    """An alembic config for this database that leaves the caller's logging alone."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    # `%` is alembic's interpolation character; URLs may contain it (encoded passwords).
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logging"] = False
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema to `revision` (blocking; run it outside an event loop or in a thread)."""
    command.upgrade(alembic_config(database_url), revision)


def head_revision() -> str | None:
    """The newest migration's revision."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return script.get_current_head()


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None before the first migration)."""
    return MigrationContext.configure(connection).get_current_revision()
