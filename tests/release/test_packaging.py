"""What the service's wheel carries: every file of `app/` and the top-level `migrations/`
(as `app.migrations`), nothing else of the repository; and `alembic.ini` keeps working for
developers in a checkout."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from app.storage.migrate import head_revision, migrations_dir
from tests.release.installed import Release, user_environment
from tests.support.processes import REPO


def tracked(folder: str) -> set[str]:
    """The files under `folder` that git tracks or would (a fresh clone, and work in progress)."""
    done = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", folder],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(done.stdout.split())


def test_every_package_of_app_is_listed_for_the_wheel() -> None:
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    on_disk = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "app").rglob("__init__.py")
    }
    assert listed == on_disk | {"app.migrations"}, "pyproject.toml [tool.setuptools] packages"


def test_the_wheel_holds_app_and_its_migrations_and_nothing_else(release: Release) -> None:
    with zipfile.ZipFile(release.service_wheel) as wheel:
        names = {name for name in wheel.namelist() if ".dist-info/" not in name}
        metadata = wheel.read(next(n for n in wheel.namelist() if n.endswith("/METADATA")))
    expected = tracked("app") | {
        "app/migrations/" + path.removeprefix("migrations/") for path in tracked("migrations")
    }
    assert names == expected
    assert b"Requires-Dist: fastapi-offline" in metadata  # /docs' assets come with it


def test_the_python_clients_sdist_and_wheel_hold_its_package_and_not_its_tests(
    release: Release,
) -> None:
    # Its tests sit beside it (clients/python/tests) and run only inside the repository.
    with tarfile.open(release.only("mcp_eventlog_client-*.tar.gz")) as sdist:
        files = {m.name.split("/", 1)[1] for m in sdist.getmembers() if m.isfile()}
    outside = {name for name in files if not name.startswith("src/mcp_eventlog_client")}
    assert outside <= {"MANIFEST.in", "PKG-INFO", "README.md", "pyproject.toml", "setup.cfg"}
    with zipfile.ZipFile(release.client_wheel) as wheel:
        tops = {name.split("/", 1)[0] for name in wheel.namelist()}
    assert {top.split("-", 1)[0] for top in tops} == {"mcp_eventlog_client"}


def test_a_checkout_finds_the_top_level_migrations() -> None:
    # The editable install maps `app.migrations` onto the repository's migrations/.
    assert migrations_dir() == REPO / "migrations"
    assert head_revision() == max(
        p.name.split("_")[0] for p in (REPO / "migrations" / "versions").glob("*.py")
    )


def test_developers_alembic_upgrade_head_still_works(tmp_path: Path) -> None:
    database = tmp_path / "dev.db"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "alembic"), "upgrade", "head"],
        cwd=REPO,
        env=user_environment(EVENTLOG_DATABASE_URL=f"sqlite+aiosqlite:///{database}"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"-> {head_revision()}" in done.stderr


def test_eventlog_migrations_dir_still_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTLOG_MIGRATIONS_DIR", str(tmp_path))
    assert migrations_dir() == tmp_path


# The lifecycle scripts npm runs when a package is installed (npm 11 warns of them).
INSTALL_SCRIPTS = ("preinstall", "install", "postinstall", "prepare")


def test_the_npm_tarball_ships_built_and_runs_nothing_at_install(release: Release) -> None:
    """The tarball carries the built JavaScript and types of every entry point, so an
    install builds nothing: no install-time script (it is built when packed, `prepack`)."""
    with tarfile.open(release.npm_tarball) as tar:
        names = set(tar.getnames())
        manifest_file = tar.extractfile("package/package.json")
        assert manifest_file is not None
        manifest = json.load(manifest_file)
    scripts = manifest.get("scripts", {})
    assert [name for name in INSTALL_SCRIPTS if name in scripts] == []
    targets = {manifest["main"], manifest["types"]}
    for entry in manifest["exports"].values():
        targets |= set(entry.values())
    assert len(targets) >= 4
    missing = sorted(t for t in targets if f"package/{t.removeprefix('./')}" not in names)
    assert missing == []
