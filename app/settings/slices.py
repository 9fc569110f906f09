"""The settings each component takes: frozen slices of `Settings`.

`Settings` is the one place the environment is read and checked (every variable keeps its
`EVENTLOG_<NAME>` name); a component is handed only the slice it reads, so its constructor
names what it depends on and a test builds exactly that. Each field of a slice names the
`Settings` field it is taken from as its alias: `LiveLimits.max_readers` is
`EVENTLOG_LIVE_MAX_READERS`. tests/settings/test_slices.py holds that every alias names a
field of `Settings` and that no field of a component's concern is left out of its slice.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from app.domain.decision import TerminalPolicy


class Slice(BaseModel):
    """A frozen view of some `Settings` fields, under shorter names."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @classmethod
    def of(cls, settings: Any) -> Self:
        """The slice of `settings` (already validated there: copied, not checked again)."""
        values = {
            name: getattr(settings, field.alias or name) for name, field in cls.model_fields.items()
        }
        return cls.model_construct(**values)  # type: ignore[return-value]


class BodyLimits(Slice):
    """What one request may bring, and how long it may take to bring it."""

    max_event_bytes: int = Field(alias="max_event_bytes")
    max_batch_events: int = Field(alias="max_batch_events")
    max_body_bytes: int = Field(alias="max_body_bytes")
    max_body_bytes_in_flight: int = Field(alias="max_body_bytes_in_flight")
    body_timeout_seconds: float = Field(alias="body_timeout_seconds")
    max_header_bytes: int = Field(alias="max_header_bytes")
    max_headers: int = Field(alias="max_headers")
    header_timeout_seconds: float = Field(alias="header_timeout_seconds")
    keep_alive_seconds: int = Field(alias="keep_alive_seconds")
    max_connections: int = Field(alias="max_connections")


class StreamRules(Slice):
    """What a generation may hold and for how long, by default and at most, and how a
    resume at a terminal generation is answered."""

    terminal_resume: TerminalPolicy = Field(alias="terminal_resume")
    default_max_events: int = Field(alias="default_max_events")
    max_events_limit: int = Field(alias="max_events_limit")
    default_ttl_seconds: int = Field(alias="default_ttl_seconds")
    max_ttl_seconds: int = Field(alias="max_ttl_seconds")


class PageLimits(Slice):
    """How much one page read answers."""

    default_limit: int = Field(alias="default_page_limit")
    max_limit: int = Field(alias="max_page_limit")
    max_bytes: int = Field(alias="max_page_bytes")


class LiveLimits(Slice):
    """Live readers (`/live`, long polls): how many, how long, how much they may hold."""

    heartbeat_seconds: float = Field(alias="live_heartbeat_seconds")
    retry_ms: int = Field(alias="live_retry_ms")
    max_seconds: float = Field(alias="live_max_seconds")
    max_readers: int = Field(alias="live_max_readers")
    max_wait_seconds: float = Field(alias="live_max_wait_seconds")
    fanout_ms_per_reader: float = Field(alias="live_fanout_ms_per_reader")
    fanout_max_ms: float = Field(alias="live_fanout_max_ms")
    poll_seconds: float = Field(alias="live_poll_seconds")
    tenant_share: float = Field(alias="live_tenant_share")
    page_bytes: int = Field(alias="live_page_bytes")
    chunk_bytes: int = Field(alias="live_chunk_bytes")
    max_response_bytes_in_flight: int = Field(alias="max_response_bytes_in_flight")
    max_pages_in_flight: int = Field(alias="max_pages_in_flight")


class ChannelLimits(Slice):
    """Append channels (`/v1/channel`)."""

    max_in_flight: int = Field(alias="channel_max_in_flight")
    max_per_key: int = Field(alias="channel_max_per_key")
    idle_seconds: float = Field(alias="channel_idle_seconds")


class Retention(Slice):
    """What is kept, for how long, and how often the collector runs."""

    interval_seconds: float = Field(alias="retention_interval_seconds")
    batch_size: int = Field(alias="retention_batch_size")
    tombstone_ttl_seconds: int = Field(alias="tombstone_ttl_seconds")
    max_generations_per_stream: int = Field(alias="max_generations_per_stream")
    decision_log: bool = Field(alias="decision_log")
    decision_log_max_rows: int = Field(alias="decision_log_max_rows")
    decision_log_max_age_seconds: int = Field(alias="decision_log_max_age_seconds")


class LeaseSettings(Slice):
    """Writer leases: how long one lasts, how often lapsed ones are swept."""

    writer_lease_seconds: int = Field(alias="writer_lease_seconds")
    sweep_seconds: float = Field(alias="lease_sweep_seconds")
    resume_catchup_ms: int = Field(alias="resume_catchup_ms")


class TaskSettings(Slice):
    """Durable tasks."""

    default_ttl_ms: int = Field(alias="task_default_ttl_ms")
    poll_interval_ms: int = Field(alias="task_poll_interval_ms")


class GatewaySettings(Slice):
    """`mcp-eventlog gateway`: its upstream, and how it talks to it."""

    upstream: str | None = Field(alias="gateway_upstream")
    tasks: str | None = Field(alias="gateway_tasks")
    path: str = Field(alias="gateway_path")
    tenant: str = Field(alias="gateway_tenant")
    secret: str | None = Field(alias="gateway_secret", repr=False)
    connect_timeout_seconds: float = Field(alias="gateway_connect_timeout_seconds")
    read_timeout_seconds: float = Field(alias="gateway_read_timeout_seconds")
    max_connections: int = Field(alias="gateway_max_connections")
    max_event_bytes: int = Field(alias="gateway_max_event_bytes")
    reconnects: int = Field(alias="gateway_reconnects")
    max_retry_ms: int = Field(alias="gateway_max_retry_ms")
    trusted_proxies: tuple[str, ...] = Field(alias="gateway_trusted_proxies")
    fence_seconds: float = Field(alias="gateway_fence_seconds")
    relay_buffer_bytes: int = Field(alias="gateway_relay_buffer_bytes")
    shutdown_grace_seconds: float = Field(alias="gateway_shutdown_grace_seconds")
