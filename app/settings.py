"""Configuration: environment variables with the `EVENTLOG_` prefix (see the README)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.domain.decision import TerminalPolicy

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./eventlog.db"


class Settings(BaseSettings):
    """Every setting of the service; each is `EVENTLOG_<NAME>` in the environment."""

    model_config = SettingsConfigDict(env_prefix="EVENTLOG_", extra="ignore", frozen=True)

    database_url: str = DEFAULT_DATABASE_URL
    migrate_on_start: bool | None = Field(
        default=None, description="Run migrations in `serve`; default: on for SQLite only."
    )
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = "FULL"
    sqlite_busy_timeout_ms: int = Field(default=10_000, ge=0)
    db_pool_size: int = Field(default=10, ge=1)
    db_max_overflow: int = Field(default=10, ge=0)

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)

    terminal_resume: TerminalPolicy = TerminalPolicy.RESET
    default_max_events: int = Field(default=10_000, ge=1)
    max_events_limit: int = Field(default=1_000_000, ge=1)
    default_ttl_seconds: int = Field(default=86_400, ge=1)
    max_ttl_seconds: int = Field(default=30 * 86_400, ge=1)

    max_event_bytes: int = Field(default=1_048_576, ge=1)
    max_batch_events: int = Field(default=1_000, ge=1)
    max_body_bytes: int = Field(default=16 * 1_048_576, ge=1)
    max_event_type_length: int = Field(default=128, ge=1)
    max_producer_length: int = Field(default=256, ge=1)

    default_page_limit: int = Field(default=500, ge=1)
    max_page_limit: int = Field(default=5_000, ge=1)
    max_page_bytes: int = Field(default=4 * 1_048_576, ge=1)

    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @property
    def is_sqlite(self) -> bool:
        """Whether the database is the embedded SQLite file."""
        return self.database_url.startswith("sqlite")

    @property
    def should_migrate_on_start(self) -> bool:
        """`serve` migrates SQLite by default; PostgreSQL only when asked to."""
        return self.is_sqlite if self.migrate_on_start is None else self.migrate_on_start
