"""Debian's Chromium, driven headless by Playwright (never `playwright install`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

from tests.support import needs

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not os.path.exists(CHROMIUM) or shutil.which(CHROMIUM) is None:
        return f"Chromium is not installed at {CHROMIUM} (run `make test-tools`)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (make install)"
    return None


def require_chromium() -> None:
    """Skip with the reason, or fail under CI=true where the browser tests must run."""
    reason = missing()
    if reason is not None:
        needs.missing("Chromium for the console's browser tests", reason)


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium, closed at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for a module's tests (skips, or fails under CI, without it)."""
    require_chromium()
    with chromium() as launched:
        yield launched
