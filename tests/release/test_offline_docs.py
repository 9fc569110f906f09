"""The API's documentation pages work with no network but the service's own.

Headless Chromium (Debian's, as the console's tests use it) opens `/docs` and `/redoc` of a
real service process while every request to anywhere else is cut (aborted and recorded).
Swagger UI must render every operation of `/openapi.json` with no request cut, Redoc the
API's title and its operations with none cut but its own branding logo (an image its
bundle names on Redocly's site, drawn in the sidebar's footer). FastAPI's own pages load
their scripts from a CDN and stay blank here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from app import __version__
from tests.support.browser import require_chromium
from tests.support.processes import running_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Route

pytestmark = pytest.mark.process

TIMEOUT_MS = 30_000  # a loaded 2-core machine; every wait is on a condition
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"  # the "API docs by Redocly" footer
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    path = tmp_path_factory.mktemp("docs") / "eventlog.db"
    with running_server({"EVENTLOG_DATABASE_URL": f"sqlite+aiosqlite:///{path}"}) as base:
        yield base


@dataclass
class Offline:
    """A browser context whose only network is the service; what it cut, what went wrong."""

    context: BrowserContext
    cut: list[str] = field(default_factory=list)
    tolerated: tuple[str, ...] = ()
    errors: list[str] = field(default_factory=list)

    def open(self, url: str) -> Page:
        page = self.context.new_page()
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.goto(url)
        return page


@pytest.fixture
def offline(browser: Browser, service: str) -> Iterator[Offline]:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    state = Offline(context)

    def only_the_service(route: Route) -> None:
        url = route.request.url
        if url.startswith(f"{service}/") or url.startswith("data:"):
            route.continue_()
        else:
            state.cut.append(url)
            route.abort("internetdisconnected")

    context.route("**/*", only_the_service)
    try:
        yield state
        cut = [url for url in state.cut if url not in state.tolerated]
        assert cut == [], f"the page asked for more than the service: {cut}"
        assert state.errors == []
    finally:
        context.close()


def operations(service: str) -> list[dict[str, Any]]:
    """Every operation of the service's OpenAPI document, with its path and method."""
    document = httpx.get(f"{service}/openapi.json").json()
    return [
        {"path": path, "method": method, **operation}
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


def test_swagger_ui_renders_every_operation_offline(offline: Offline, service: str) -> None:
    from playwright.sync_api import expect

    expected = operations(service)
    page = offline.open(f"{service}/docs")
    blocks = page.locator(".opblock")
    expect(blocks).to_have_count(len(expected))
    shown = {
        (block.get_attribute("id") or "", text)
        for block, text in zip(
            blocks.all(),
            page.locator(".opblock .opblock-summary-path").all_inner_texts(),
            strict=True,
        )
    }
    assert {text.replace("\u200b", "") for _, text in shown} == {op["path"] for op in expected}
    expect(page.locator(".info .title")).to_contain_text("mcp-eventlog")
    expect(page.locator(".info .title")).to_contain_text(__version__)


def test_redoc_renders_the_api_offline(offline: Offline, service: str) -> None:
    from playwright.sync_api import expect

    first = operations(service)[0]
    offline.tolerated = (REDOC_LOGO,)
    page = offline.open(f"{service}/redoc")
    expect(page.locator("h1").first).to_contain_text("mcp-eventlog")
    expect(page.get_by_text(first["summary"]).first).to_be_attached()


def test_the_pages_name_no_other_host(service: str) -> None:
    for page in ("/docs", "/redoc"):
        html = httpx.get(f"{service}{page}").text
        assert "http://" not in html
        assert "https://" not in html
