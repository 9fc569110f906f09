"""Traces, when the standard `OTEL_*` variables ask for them (docs/traces.md).

This module only decides, from the environment and without importing OpenTelemetry,
whether this process traces; `app/telemetry/tracing.py`, which needs the `otel` extra,
does the tracing. With nothing configured neither the SDK nor an instrumentation is
imported, no tracer provider exists and nothing is installed: a request costs what it did.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.telemetry.tracing import Tracing

log = logging.getLogger(__name__)

# Where an OTLP exporter sends spans: setting either is how one usually says "trace".
_OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The span exporters the environment asks for, in order; empty: do not trace.

    `OTEL_SDK_DISABLED=true` turns everything off. Otherwise `OTEL_TRACES_EXPORTER` (a comma
    separated list, `none` for none) decides; unset, an OTLP endpoint set means `otlp`.
    Empty values count as unset, as the OpenTelemetry specification says.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    listed = environ.get("OTEL_TRACES_EXPORTER", "").strip()
    if listed:
        names = [name.strip().lower() for name in listed.split(",")]
        return [name for name in names if name and name != "none"]
    if any(environ.get(name, "").strip() for name in _OTLP_ENDPOINTS):
        return ["otlp"]
    return []


def from_environment() -> Tracing | None:
    """This process's tracing as `OTEL_*` configures it, or None (not asked for, or the
    `otel` extra is not installed: then a warning says so, and the service runs untraced)."""
    names = exporter_names(os.environ)
    if not names:
        return None
    try:
        from app.telemetry.tracing import Tracing
    except ImportError as missing:
        log.warning(
            "traces are configured (OTEL_*) but the `otel` extra is not installed (no module "
            "%r): serving without traces; install mcp-eventlog[otel] to send them",
            missing.name,
        )
        return None
    return Tracing.exporting(names)
