"""Which `OTEL_*` variables turn tracing on, and that nothing is installed when none does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from app import __version__, telemetry
from app.settings import Settings
from app.telemetry import exporter_names
from tests.support.app import started_app, state_of
from tests.support.processes import REPO

ENDPOINT = "http://127.0.0.1:4318"


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({}, []),
        ({"OTEL_SERVICE_NAME": "eventlog", "OTEL_TRACES_SAMPLER": "always_on"}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{ENDPOINT}/v1/traces"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, []),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": "otlp, Console"}, ["otlp", "console"]),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, []),
        ({"OTEL_TRACES_EXPORTER": " ", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, ["otlp"]),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, []),
        ({"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "console"}, []),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, ["otlp"]),
    ],
)
def test_which_variables_turn_tracing_on(environ: dict[str, str], names: list[str]) -> None:
    assert exporter_names(environ) == names


@pytest.fixture
def no_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment that says nothing about OpenTelemetry."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


@pytest.mark.usefixtures("no_otel_variables")
async def test_with_nothing_configured_no_tracer_provider_is_installed(
    settings: Settings,
) -> None:
    assert telemetry.from_environment() is None
    async with started_app(settings) as (app, client):
        token = (await client.post("/v1/streams/plain/generations")).json()["generation"]
        answer = await client.post("/v1/streams/plain/resume", json={"last_event_id": f"{token}:0"})
        assert answer.json()["verdict"] == "resume"
        container = state_of(app).container
        assert container.tracing is None
        assert not getattr(app, "_is_instrumented_by_opentelemetry", False)
        for engine in container.database.sync_engines:
            assert not engine.dispatch.before_cursor_execute, engine
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _python(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """This interpreter run with `args` in the checkout, its output captured; it must succeed."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def _run_untraced(mode: str, database_url: str, environ: dict[str, str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVENTLOG_"))}
    env |= environ | {"PYTHONPATH": str(REPO)}
    done = _python(["-m", "tests.telemetry.untraced", mode, database_url], env)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_service_behaves_the_same_without_the_extra(
    tmp_path: Path, sqlite_template: Path
) -> None:
    answers = []
    for name, mode, environ in [
        ("plain", "allow", {}),
        ("configured", "block", {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}),
    ]:
        path = tmp_path / f"{name}.db"
        shutil.copyfile(sqlite_template, path)
        answers.append(_run_untraced(mode, f"sqlite+aiosqlite:///{path}", environ))
    plain, without_extra = answers

    # Nothing configured: not one module of the extra imported, though it is installed.
    assert (plain["imported"], plain["warnings"]) == ([], [])
    # Configured without the extra: one warning, and the same answers, untraced.
    assert without_extra["imported"] == []
    [warning] = without_extra["warnings"]
    assert "mcp-eventlog[otel]" in warning
    del plain["warnings"], without_extra["warnings"]
    assert plain == without_extra
    assert plain == {
        "appended": 201,
        "verdict": "resume",
        "events": ["two"],
        "instrumented": False,
        "imported": [],
    }


_PROBE = """
from app import telemetry
tracing = telemetry.from_environment()
with tracing.provider.get_tracer("test").start_as_current_span("probe"):
    pass
tracing.shutdown()
"""


def test_configured_tracing_exports_to_the_named_exporter_as_mcp_eventlog() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"OTEL_TRACES_EXPORTER": "console", "PYTHONPATH": str(REPO)}
    done = _python(["-c", _PROBE], env)
    exported = json.loads(done.stdout)  # the console exporter: the span as JSON, on exit
    assert exported["name"] == "probe"
    assert exported["resource"]["attributes"]["service.name"] == "mcp-eventlog"


@pytest.mark.usefixtures("no_otel_variables")
def test_the_environment_names_the_service_when_it_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "eventlog-eu-1")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
    tracing = telemetry.from_environment()
    assert tracing is not None
    tracing.shutdown()
    resource = tracing.provider.resource.attributes
    assert resource["service.name"] == "eventlog-eu-1"
    assert resource["deployment.environment"] == "staging"
    assert resource["service.version"] == __version__


@pytest.mark.usefixtures("no_otel_variables")
@pytest.mark.parametrize(
    ("environ", "complaint"),
    [
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, "no span exporter 'jaeger'"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "unsupported OTLP protocol 'http/json'",
        ),
    ],
)
def test_a_misconfigured_exporter_stops_the_start_with_a_reason(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], complaint: str
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=complaint):
        telemetry.from_environment()
