"""The console's files as the service serves them: headers, packaging, and what they may do.

These run without a browser. The browser tests (test_browser.py) drive the page itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.console.router import CONTENT_SECURITY_POLICY, assets
from tests.conftest import app_client
from tests.support.operators import ADMIN, keyed_settings

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "app" / "console" / "static"


@pytest.fixture
async def http(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The app with keys configured, on a SQLite copy (the console needs no database)."""
    path = tmp_path / "eventlog.db"
    shutil.copyfile(sqlite_template, path)
    async with app_client(keyed_settings(f"sqlite+aiosqlite:///{path}")) as client:
        yield client


def assert_secured(response: httpx.Response) -> None:
    csp = response.headers["content-security-policy"]
    assert csp == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in csp
    assert "'unsafe-inline'" not in csp
    assert "'unsafe-eval'" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert "set-cookie" not in response.headers


async def test_the_shell_is_served_without_a_key_and_the_data_is_not(
    http: httpx.AsyncClient,
) -> None:
    page = await http.get("/admin/ui/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert_secured(page)
    data = await http.get("/admin/v1/streams")
    assert data.status_code == 401
    keyed = await http.get("/admin/v1/streams", headers={"Authorization": f"Bearer {ADMIN}"})
    assert keyed.status_code == 200


async def test_the_bare_path_redirects_relatively_to_the_slash(http: httpx.AsyncClient) -> None:
    answer = await http.get("/admin/ui")
    assert answer.status_code == 308
    # Relative, so a proxy that mounts the service under a prefix keeps it.
    assert answer.headers["location"] == "ui/"
    assert_secured(answer)


@pytest.mark.parametrize(
    ("path", "media_type"),
    [
        ("js/main.js", "text/javascript; charset=utf-8"),
        ("console.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ],
)
async def test_assets_have_their_media_type_and_the_headers(
    http: httpx.AsyncClient, path: str, media_type: str
) -> None:
    answer = await http.get(f"/admin/ui/{path}")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == media_type
    assert answer.content == (STATIC / path).read_bytes()
    assert_secured(answer)


async def test_an_unchanged_asset_is_answered_304(http: httpx.AsyncClient) -> None:
    first = await http.get("/admin/ui/js/main.js")
    assert first.headers["cache-control"] == "no-cache"
    etag = first.headers["etag"]
    again = await http.get("/admin/ui/js/main.js", headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    other = await http.get("/admin/ui/js/main.js", headers={"If-None-Match": '"other"'})
    assert other.status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "nope.js",
        "../api/app.py",
        "..%2F__init__.py",
        "%2e%2e/router.py",
        "js/../../router.py",
        "router.py",
        "__init__.py",
    ],
)
async def test_only_the_shipped_files_are_served(http: httpx.AsyncClient, path: str) -> None:
    answer = await http.get(f"/admin/ui/{path}")
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == "not_found"
    assert b"import" not in answer.content


async def test_the_console_is_not_in_the_openapi_document(http: httpx.AsyncClient) -> None:
    spec = (await http.get("/openapi.json")).json()
    assert not [p for p in spec["paths"] if p.startswith("/admin/ui")]


def test_every_file_is_packaged_and_every_import_resolves() -> None:
    served = assets()
    on_disk = {str(p.relative_to(STATIC)) for p in STATIC.rglob("*") if p.is_file()}
    assert set(served) == on_disk
    index = served["index.html"].body.decode()
    referenced = set(re.findall(r'(?:src|href)="([^"#]+)"', index))
    assert referenced == {"favicon.svg", "console.css", "js/main.js"}
    for name, asset in served.items():
        if not name.endswith(".js"):
            continue
        for module in re.findall(r"from '\./([^']+)'", asset.body.decode()):
            assert f"js/{module}" in served, f"{name} imports a missing ./{module}"


def test_no_file_loads_anything_from_another_origin() -> None:
    for name, asset in assets().items():
        text = asset.body.decode()
        # The SVG namespace is an identifier, not a download.
        urls = set(re.findall(r"https?://[^\s'\"<>)]+", text)) - {"http://www.w3.org/2000/svg"}
        assert not urls, f"{name} names {urls}"


def test_the_page_has_no_inline_script_or_handler() -> None:
    index = assets()["index.html"].body.decode()
    for tag in re.findall(r"<script\b[^>]*>", index):
        assert "src=" in tag
    assert not re.search(r"<script\b[^>]*>\s*[^<\s]", index), "inline script content"
    assert not re.search(r"\son[a-z]+\s*=", index), "inline event handler"
    assert not re.search(r"\sstyle\s*=", index), "inline style"


def test_no_module_turns_a_string_into_markup_or_code() -> None:
    forbidden = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function"
        r"|createContextualFragment|DOMParser|srcdoc"
    )
    for name, asset in assets().items():
        if name.endswith(".js"):
            found = forbidden.findall(asset.body.decode())
            assert not found, f"{name} uses {found}"


def test_the_wheel_ships_every_console_file(tmp_path: Path) -> None:
    """Built from a copy of the sources, as `pip install` would build it (package data)."""
    source = tmp_path / "source"
    for package in ("app", "migrations"):  # migrations/ is the wheel's app.migrations
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(REPO / package, source / package, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet"]
    command += ["--disable-pip-version-check", "-w", str(tmp_path / "dist"), str(source)]
    built = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n.removeprefix("app/console/static/") for n in archive.namelist()}
    assert set(assets()) <= shipped
