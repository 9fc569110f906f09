"""What a test needs from the machine (a PostgreSQL server, Chromium, promtool, Node).

Without it a test skips and says what is missing and how to get it, except under `CI=true`:
CI must run everything, so there the same absence fails the test. Every such check of the
suite ends in `missing(...)`, so none can skip silently in CI.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def under_ci() -> bool:
    """Whether this run is CI's (`CI=true`), where nothing may skip."""
    return os.environ.get("CI", "").lower() == "true"


def missing(what: str, why: str, *, required: bool | None = None) -> NoReturn:
    """Skip the test for want of `what` (`why`); fail instead when `required` (CI's run)."""
    if under_ci() if required is None else required:
        pytest.fail(f"{what} is required here (CI=true), but {why}", pytrace=False)
    pytest.skip(f"{what} is missing: {why}")
