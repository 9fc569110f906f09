"""The soak flag: whether the long variants of the reliability tests run."""

from __future__ import annotations

import os


def soak_enabled() -> bool:
    """Whether the long variants run (`EVENTLOG_SOAK=1`, as `make soak` sets it)."""
    return os.environ.get("EVENTLOG_SOAK", "") not in ("", "0")
