"""The slices of `Settings` the components take (app/settings/slices.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.settings import Settings
from app.settings.slices import (
    BodyLimits,
    ChannelLimits,
    GatewaySettings,
    LeaseSettings,
    LiveLimits,
    PageLimits,
    Retention,
    Slice,
    StreamRules,
    TaskSettings,
)

SLICES: dict[str, type[Slice]] = {
    "bodies": BodyLimits,
    "streams": StreamRules,
    "pages": PageLimits,
    "live": LiveLimits,
    "channels": ChannelLimits,
    "retention": Retention,
    "leases": LeaseSettings,
    "tasks": TaskSettings,
    "gateway": GatewaySettings,
}

# The settings no component takes as a slice: the process's own (where it listens, which
# database, how it logs, its keys).
PROCESS_WIDE = {
    "database_url", "migrate_on_start", "sqlite_synchronous", "sqlite_busy_timeout_ms",
    "db_pool_size", "db_max_overflow", "host", "port", "allowed_hosts", "allowed_origins",
    "log_level", "log_format", "keys", "shutdown_timeout_seconds",
}  # fmt: skip


def test_every_alias_names_a_setting_and_every_setting_has_one_home() -> None:
    homes: dict[str, list[str]] = {}
    for attribute, kind in SLICES.items():
        for name, field in kind.model_fields.items():
            assert field.alias in Settings.model_fields, (kind.__name__, name, field.alias)
            homes.setdefault(field.alias, []).append(attribute)
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}
    unsliced = set(Settings.model_fields) - set(homes) - PROCESS_WIDE
    assert unsliced == set(), "a new setting belongs in a slice (or in PROCESS_WIDE)"
    assert set(homes) & PROCESS_WIDE == set()


@pytest.mark.parametrize(("attribute", "kind"), SLICES.items())
def test_each_slice_carries_the_settings_values(attribute: str, kind: type[Slice]) -> None:
    settings = Settings()
    part = getattr(settings, attribute)
    assert isinstance(part, kind)
    for name, field in kind.model_fields.items():
        assert getattr(part, name) == getattr(settings, field.alias)


def test_the_environment_names_stay_those_of_the_flat_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVENTLOG_LIVE_MAX_READERS", "7")
    monkeypatch.setenv("EVENTLOG_GATEWAY_RECONNECTS", "3")
    monkeypatch.setenv("EVENTLOG_TASK_POLL_INTERVAL_MS", "250")
    settings = Settings()
    assert settings.live.max_readers == 7
    assert settings.gateway.reconnects == 3
    assert settings.tasks.poll_interval_ms == 250


def test_a_slice_is_frozen_and_follows_a_copy_of_its_settings() -> None:
    settings = Settings(live_max_readers=5)
    with pytest.raises(ValidationError):
        settings.live.max_readers = 6
    assert settings.live.max_readers == 5
    copied = settings.model_copy(update={"live_max_readers": 9})
    assert copied.live.max_readers == 9
    assert settings.live.max_readers == 5


def test_the_gateway_secret_is_not_shown() -> None:
    assert "s3cret" not in repr(Settings(gateway_secret="s3cret-s3cret-s3cret").gateway)
