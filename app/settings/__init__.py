"""Configuration: environment variables with the `EVENTLOG_` prefix (see the README)."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.domain.decision import TerminalPolicy
from app.settings.slices import (
    BodyLimits,
    ChannelLimits,
    GatewaySettings,
    LeaseSettings,
    LiveLimits,
    PageLimits,
    Retention,
    StreamRules,
    TaskSettings,
)

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./eventlog.db"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")

# The schemes a database URL may be written with, and the one each means here: the service
# runs on SQLite through aiosqlite and on PostgreSQL through asyncpg, so a URL without a
# driver (`postgres://`, as Heroku, psql and many tools write it; `postgresql://`;
# `sqlite://`) means that driver, as it would to those tools, rather than SQLAlchemy's
# synchronous default, which the service cannot use.
_SCHEMES = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgres+asyncpg": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
}
_URL_EXAMPLES = "sqlite+aiosqlite:///path/to/eventlog.db or postgresql://user:pass@host/db"


def database_url_of(value: str) -> str:
    """`value` with the scheme the service connects with (`_SCHEMES`); a `ValueError`
    that names the problem and the fix for any other. The message never quotes the URL
    (it may hold a password), only its scheme."""
    scheme, separator, rest = value.partition("://")
    if not separator or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        raise ValueError(f"is not a database URL: write {_URL_EXAMPLES}")
    known = _SCHEMES.get(scheme.lower())
    if known is not None:
        return f"{known}://{rest}"
    backend, _, driver = scheme.lower().partition("+")
    if backend in ("sqlite", "postgres", "postgresql") and driver:
        fix = "sqlite+aiosqlite://" if backend == "sqlite" else "postgresql://"
        raise ValueError(
            f"the driver {driver!r} is not one the service runs on: write {fix}… "
            f"(its own driver, {_SCHEMES[backend].partition('+')[2]}, is installed with it)"
        )
    raise ValueError(
        f"{scheme!r} is not a database the service runs on: use SQLite or PostgreSQL, "
        f"as {_URL_EXAMPLES}"
    )


class KeySpec(BaseModel):
    """One bearer key of `EVENTLOG_KEYS`: its scope, its tenant, the key or its SHA-256."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: Literal["writer", "admin"]
    tenant: str = Field(default="default", min_length=1, max_length=64)
    key: str | None = Field(default=None, min_length=16, repr=False)
    key_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _one_secret(self) -> KeySpec:
        if (self.key is None) == (self.key_sha256 is None):
            raise ValueError("give exactly one of key or key_sha256")
        return self

    @property
    def digest(self) -> bytes:
        """The SHA-256 of the key: how it is kept and compared."""
        if self.key_sha256 is not None:
            return bytes.fromhex(self.key_sha256)
        assert self.key is not None
        return hashlib.sha256(self.key.encode()).digest()


class Settings(BaseSettings):
    """Every setting of the service; each is `EVENTLOG_<NAME>` in the environment."""

    model_config = SettingsConfigDict(env_prefix="EVENTLOG_", extra="ignore", frozen=True)

    database_url: str = DEFAULT_DATABASE_URL
    migrate_on_start: bool | None = Field(
        default=None, description="Run migrations in `serve`; default: on for SQLite only."
    )
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = "FULL"
    sqlite_busy_timeout_ms: int = Field(default=10_000, ge=0)
    db_pool_size: int = Field(default=20, ge=1)
    db_max_overflow: int = Field(default=0, ge=0)

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    allowed_hosts: tuple[str, ...] | None = Field(
        default=None,
        description="Host names served (JSON list; `*`: any). Default: loopback only while "
        "no keys are configured, any host once they are.",
    )
    allowed_origins: tuple[str, ...] = Field(
        default=(),
        description="Browser origins allowed besides the service's own (JSON list).",
    )

    terminal_resume: TerminalPolicy = TerminalPolicy.RESET
    default_max_events: int = Field(default=10_000, ge=1)
    max_events_limit: int = Field(default=1_000_000, ge=1)
    default_ttl_seconds: int = Field(default=86_400, ge=1)
    max_ttl_seconds: int = Field(default=30 * 86_400, ge=1)

    max_event_bytes: int = Field(default=1_048_576, ge=1)
    max_batch_events: int = Field(default=1_000, ge=1)
    max_body_bytes: int = Field(default=16 * 1_048_576, ge=1)
    max_body_bytes_in_flight: int = Field(default=64 * 1_048_576, ge=1)
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    # What a connection may take before it is a request (app/api/connections.py).
    max_header_bytes: int = Field(default=64 * 1024, ge=1024)
    max_headers: int = Field(default=100, ge=1)
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    keep_alive_seconds: int = Field(default=5, ge=1)
    max_connections: int = Field(default=4_096, ge=1)

    default_page_limit: int = Field(default=500, ge=1)
    max_page_limit: int = Field(default=5_000, ge=1)
    max_page_bytes: int = Field(default=4 * 1_048_576, ge=1)

    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"

    # NoDecode: the JSON is read by `_keys_from_json`, so that a command given `keys=()`
    # (migrate, gc) never parses the environment's keys at all.
    keys: Annotated[tuple[KeySpec, ...], NoDecode] = Field(
        default=(), description="Bearer keys (JSON list); none: the service is open, loopback only."
    )

    retention_interval_seconds: float = Field(
        default=60.0, ge=0, description="Pause between retention runs in `serve`; 0: no worker."
    )
    retention_batch_size: int = Field(default=200, ge=1)
    tombstone_ttl_seconds: int = Field(default=7 * 86_400, ge=0)
    max_generations_per_stream: int = Field(default=100, ge=1)

    live_heartbeat_seconds: float = Field(default=15.0, gt=0, description="SSE keep-alive.")
    live_retry_ms: int = Field(default=1_000, ge=0, description="The SSE `retry:` field.")
    live_max_seconds: float = Field(
        default=300.0, gt=0, description="A live connection ends after this; the reader resumes."
    )
    live_max_readers: int = Field(default=2_000, ge=1, description="Live readers per process.")
    live_max_wait_seconds: float = Field(default=30.0, gt=0, description="Longest `wait=`.")
    live_fanout_ms_per_reader: float = Field(
        default=0.25,
        ge=0,
        description="A change of a stream with N live readers here wakes them after "
        "N times this (when that is 1 ms or more), so that changes arriving meanwhile reach "
        "them in one read and one send each: one stream's fan-out cannot starve the appends.",
    )
    live_fanout_max_ms: float = Field(
        default=250.0, ge=0, description="The longest wake-up delay of a crowded stream."
    )
    live_poll_seconds: float = Field(
        default=0.1, gt=0, description="SQLite: how often other processes' commits are looked for."
    )
    # -- live reads and pages under hostile or careless readers --
    live_tenant_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="The share of EVENTLOG_LIVE_MAX_READERS one tenant may hold (live readers "
        "and long-polls together) when the keys name more than one tenant.",
    )
    live_page_bytes: int = Field(
        default=256 * 1024, ge=1, description="A live reader reads at most this much data a page."
    )
    live_chunk_bytes: int = Field(
        default=16 * 1024, ge=1, description="A live page is sent in chunks of at most this."
    )
    max_response_bytes_in_flight: int = Field(
        default=64 * 1_048_576,
        ge=1,
        description="Bytes of pages being sent at once, process-wide (live and paged).",
    )
    max_pages_in_flight: int = Field(
        default=64, ge=1, description="Page requests served at once; past it 503 too_many_pages."
    )
    shutdown_timeout_seconds: float = Field(
        default=10.0, gt=0, description="How long a stopping process waits for requests to end."
    )

    # The append channel (`GET /v1/append`, a WebSocket).
    channel_max_in_flight: int = Field(
        default=64, ge=1, description="Unanswered frames per channel; past it, reading stops."
    )
    channel_max_per_key: int = Field(default=64, ge=1, description="Open channels per key.")
    channel_idle_seconds: float = Field(
        default=60.0,
        gt=0,
        description="A channel with nothing in flight that sends nothing this long is closed; "
        "so is one whose producer does not read an answer for this long.",
    )

    # Writer leases (CONTRACT.md, "Writer leases, pipelined writers and abandoned generations");
    # a durable task's worker lease is one (docs/tasks.md).
    writer_lease_seconds: int = Field(
        default=30,
        ge=1,
        le=86_400,
        description="A generation's writer lease when its Open body names none: renewed by "
        "every append and lease call; run out, the generation is abandoned. A task's worker "
        "lease is one.",
    )
    lease_sweep_seconds: float = Field(
        default=2.0,
        ge=0,
        description="How often each replica records generations whose lease ran out as "
        "abandoned, and tasks whose worker's lease ran out as failed (worker_lost); 0: no sweep "
        "(appends, resumes and task reads still see a lapsed lease).",
    )
    resume_catchup_ms: int = Field(
        default=2_000,
        ge=0,
        le=30_000,
        description="How long a resume within a writer's pipeline window waits for the tail "
        "to reach the claim before it is reset (`lost_tail`).",
    )
    task_default_ttl_ms: int = Field(
        default=86_400_000, ge=1, description="A task's time to live when its creator names none."
    )
    task_poll_interval_ms: int = Field(
        default=1_000, ge=0, description="The poll interval a task suggests when none is named."
    )

    decision_log: bool = True
    decision_log_max_rows: int = Field(default=100_000, ge=1)
    decision_log_max_age_seconds: int = Field(default=7 * 86_400, ge=1)

    # The gateway (`mcp-eventlog gateway`, docs/gateway.md).
    gateway_upstream: str | None = Field(
        default=None, description="The MCP server the gateway forwards to (its endpoint URL)."
    )
    gateway_tasks: str | None = Field(
        default=None,
        description="Tools the gateway runs as durable tasks for 2026-07-28 requesters: "
        "a comma list of name[=optional|=required][+input-first], * for every tool "
        "(docs/tasks.md).",
    )
    gateway_path: str = Field(
        default="/mcp", pattern=r"^/[A-Za-z0-9._~/-]*$", description="The gateway's MCP path."
    )
    gateway_tenant: str = Field(
        default="default", min_length=1, max_length=64, description="Tenant of recorded streams."
    )
    gateway_secret: str | None = Field(
        default=None,
        min_length=16,
        repr=False,
        description="Key of the session scopes' HMAC. Default: a key kept in the database "
        "(created once, shared by every replica of that database).",
    )
    gateway_connect_timeout_seconds: float = Field(default=5.0, gt=0)
    gateway_read_timeout_seconds: float = Field(
        default=300.0, gt=0, description="Longest silence of an upstream response."
    )
    gateway_max_connections: int = Field(default=1_000, ge=1, description="Upstream connections.")
    gateway_max_event_bytes: int = Field(
        default=16 * 1_048_576, ge=1, description="Largest SSE event read from the upstream."
    )
    gateway_reconnects: int = Field(
        default=3,
        ge=0,
        description="Fruitless reconnects in a row (none brought a message) to an upstream "
        "stream that gave event ids before its call is failed upstream_lost.",
    )
    gateway_max_retry_ms: int = Field(
        default=5_000,
        ge=0,
        description="The longest wait before a reconnect to the upstream (caps its retry:).",
    )
    gateway_trusted_proxies: tuple[str, ...] = Field(
        default=(),
        description="Proxies (IP addresses or CIDR blocks, JSON list) whose X-Forwarded-* and "
        "Forwarded headers the gateway passes on (extended); anyone else's are replaced.",
    )
    gateway_fence_seconds: float = Field(
        default=300.0,
        ge=0,
        description="How long a recording that ended spoiled (its last batch unstored) retries "
        "fencing its generation while the log is away.",
    )
    gateway_relay_buffer_bytes: int = Field(
        default=1_048_576,
        ge=1,
        description="Data held in memory for one client that does not keep up; past it, "
        "what it has yet to be sent is read back from the log.",
    )
    gateway_shutdown_grace_seconds: float = Field(
        default=10.0, ge=0, description="How long shutdown waits for in-flight recordings."
    )

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        return database_url_of(value)

    @field_validator("keys", mode="before")
    @classmethod
    def _keys_from_json(cls, value: Any) -> Any:
        if not isinstance(value, str | bytes):
            return value
        try:
            return json.loads(value) if value.strip() else ()
        except ValueError as error:
            raise ValueError(f"is not a JSON list ({error})") from None

    @field_validator("gateway_trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for proxy in value:
            try:
                ipaddress.ip_network(proxy.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{proxy!r} is not an IP address or CIDR block") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        seen: dict[bytes, int] = {}
        for index, spec in enumerate(self.keys):
            first = seen.setdefault(spec.digest, index)
            if first != index:
                raise ValueError(
                    f"EVENTLOG_KEYS[{index}] is the same key as EVENTLOG_KEYS[{first}]: a key "
                    "has one tenant and one scope, so give each its own key"
                )
        if self.max_body_bytes_in_flight < self.max_body_bytes:
            raise ValueError(
                "EVENTLOG_MAX_BODY_BYTES_IN_FLIGHT is below EVENTLOG_MAX_BODY_BYTES: "
                "no body of the largest size could ever be read"
            )
        return self

    # The slices the components take (app/settings/slices.py): built on each call, so a
    # `model_copy(update=...)` never answers a stale one.

    @property
    def bodies(self) -> BodyLimits:
        return BodyLimits.of(self)

    @property
    def streams(self) -> StreamRules:
        return StreamRules.of(self)

    @property
    def pages(self) -> PageLimits:
        return PageLimits.of(self)

    @property
    def live(self) -> LiveLimits:
        return LiveLimits.of(self)

    @property
    def channels(self) -> ChannelLimits:
        return ChannelLimits.of(self)

    @property
    def retention(self) -> Retention:
        return Retention.of(self)

    @property
    def leases(self) -> LeaseSettings:
        return LeaseSettings.of(self)

    @property
    def tasks(self) -> TaskSettings:
        return TaskSettings.of(self)

    @property
    def gateway(self) -> GatewaySettings:
        return GatewaySettings.of(self)

    def served_hosts(self) -> frozenset[str] | None:
        """The host names served (lower case), or None for any host."""
        hosts = self.allowed_hosts
        if hosts is None:
            hosts = () if self.keys else LOOPBACK_HOSTS
        if not hosts or "*" in hosts:
            return None
        return frozenset(host.lower().strip("[]") for host in hosts)
