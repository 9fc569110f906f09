"""The settings each component takes: frozen slices of `Settings`.

`Settings` is the one place the environment is read and checked (every variable keeps its
`EVENTLOG_<NAME>` name); a component is handed only the slice it reads, so its constructor
names what it depends on and a test builds exactly that. Each field of a slice has as its
alias the `Settings` field it is taken from, named by one rule per slice: the field's own
name after the slice's prefix (`class LiveLimits(Slice, alias_generator=prefixed("live_"))`:
`LiveLimits.max_readers` is `live_max_readers`, `EVENTLOG_LIVE_MAX_READERS`), or its own
name where the slice has none; a field named otherwise states its alias (`Field(alias=...)`).
tests/settings/test_slices.py holds that every alias names a field of `Settings` and that
no field of a component's concern is left out of its slice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from app.domain.decision import TerminalPolicy


def prefixed(prefix: str) -> Callable[[str], str]:
    """The aliases of a slice whose fields are the `Settings` fields named `prefix` + name."""
    return lambda name: prefix + name


class Slice(BaseModel):
    """A frozen view of some `Settings` fields, under shorter names (by default each
    field's alias is its own name: the `Settings` field of that name)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, alias_generator=prefixed("")
    )

    @classmethod
    def of(cls, settings: Any) -> Self:
        """The slice of `settings` (already validated there: copied, not checked again)."""
        values = {
            name: getattr(settings, field.alias or name) for name, field in cls.model_fields.items()
        }
        return cls.model_construct(**values)  # type: ignore[return-value]


class BodyLimits(Slice):
    """What one request may bring, and how long it may take to bring it."""

    max_event_bytes: int
    max_batch_events: int
    max_body_bytes: int
    max_body_bytes_in_flight: int
    body_timeout_seconds: float
    max_header_bytes: int
    max_headers: int
    header_timeout_seconds: float
    keep_alive_seconds: int
    max_connections: int


class StreamRules(Slice):
    """What a generation may hold and for how long, by default and at most, and how a
    resume at a terminal generation is answered."""

    terminal_resume: TerminalPolicy
    default_max_events: int
    max_events_limit: int
    default_ttl_seconds: int
    max_ttl_seconds: int


class PageLimits(Slice):
    """How much one page read answers."""

    default_limit: int = Field(alias="default_page_limit")
    max_limit: int = Field(alias="max_page_limit")
    max_bytes: int = Field(alias="max_page_bytes")


class LiveLimits(Slice, alias_generator=prefixed("live_")):
    """Live readers (`/live`, long polls): how many, how long, how much they may hold."""

    heartbeat_seconds: float
    retry_ms: int
    max_seconds: float
    max_readers: int
    max_wait_seconds: float
    fanout_ms_per_reader: float
    fanout_max_ms: float
    poll_seconds: float
    tenant_share: float
    page_bytes: int
    chunk_bytes: int
    max_response_bytes_in_flight: int = Field(alias="max_response_bytes_in_flight")
    max_pages_in_flight: int = Field(alias="max_pages_in_flight")


class ChannelLimits(Slice, alias_generator=prefixed("channel_")):
    """Append channels (`/v1/channel`)."""

    max_in_flight: int
    max_per_key: int
    idle_seconds: float


class Retention(Slice):
    """What is kept, for how long, and how often the collector runs."""

    interval_seconds: float = Field(alias="retention_interval_seconds")
    batch_size: int = Field(alias="retention_batch_size")
    tombstone_ttl_seconds: int
    max_generations_per_stream: int
    decision_log: bool
    decision_log_max_rows: int
    decision_log_max_age_seconds: int


class LeaseSettings(Slice):
    """Writer leases: how long one lasts, how often lapsed ones are swept."""

    writer_lease_seconds: int
    sweep_seconds: float = Field(alias="lease_sweep_seconds")
    resume_catchup_ms: int


class TaskSettings(Slice, alias_generator=prefixed("task_")):
    """Durable tasks."""

    default_ttl_ms: int
    poll_interval_ms: int


class GatewaySettings(Slice, alias_generator=prefixed("gateway_")):
    """`mcp-eventlog gateway`: its upstream, and how it talks to it."""

    upstream: str | None
    tasks: str | None
    path: str
    tenant: str
    secret: str | None = Field(repr=False)
    connect_timeout_seconds: float
    read_timeout_seconds: float
    max_connections: int
    max_event_bytes: int
    reconnects: int
    max_retry_ms: int
    trusted_proxies: tuple[str, ...]
    fence_seconds: float
    relay_buffer_bytes: int
    shutdown_grace_seconds: float
