"""Installs are reproducible: one constraints file holds the tested versions,
and `make install`, `make run`, CI and the Docker image all install through it; `make run`
installs only what serving needs (no dev extras, no Node)."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from app import __version__

REPO = Path(__file__).resolve().parents[1]


def pinned() -> dict[str, str]:
    """constraints.txt as {normalized name: version}."""
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"not an exact pin: {line!r}"
            pins[canonicalize_name(name)] = version
    return pins


def declared() -> set[str]:
    """Every requirement of the service (with its extras) and of the client package."""
    names = set()
    for path in (REPO / "pyproject.toml", REPO / "clients" / "python" / "pyproject.toml"):
        project = tomllib.loads(path.read_text())["project"]
        requirements = list(project["dependencies"])
        for extra in project.get("optional-dependencies", {}).values():
            requirements += extra
        names |= {canonicalize_name(Requirement(r).name) for r in requirements}
    return names - {"mcp-eventlog", "mcp-eventlog-client"}


def test_every_declared_dependency_is_pinned() -> None:
    missing = declared() - set(pinned())
    assert not missing, f"add to constraints.txt (make constraints): {sorted(missing)}"


def test_the_tests_run_on_the_pinned_versions() -> None:
    """The environment running this suite is the one the constraints describe."""
    drift = {}
    for name, version in pinned().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            drift[name] = (version, None)
            continue
        if installed != version:
            drift[name] = (version, installed)
    assert not drift, f"pinned vs installed: {drift} (run make install)"


def make_dry_run(target: str) -> str:
    """The commands `make <target>` would run from a fresh clone (`-B`: as if nothing built)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def pip_installs(commands: str) -> list[str]:
    return [line for line in commands.splitlines() if "pip install" in line]


def test_make_run_installs_only_the_service_through_the_constraints() -> None:
    commands = make_dry_run("run")
    installs = pip_installs(commands)
    assert installs, commands
    for line in installs:
        assert "-c constraints.txt" in line
        # No extras: neither the dev tools nor the MCP SDK; the Python client goes in beside
        # the service because the service depends on it (the gateway's MCP storage convention).
        assert not re.search(r"\[dev|mcp\]", line)
    assert any("./clients/python" in line for line in installs)
    assert "npm" not in commands
    assert commands.rstrip().endswith("mcp-eventlog serve")


@pytest.mark.parametrize("target", ["install", "test"])
def test_make_install_and_test_use_the_constraints(target: str) -> None:
    commands = make_dry_run(target)
    installs = pip_installs(commands)
    assert any("[dev,mcp]" in line for line in installs), commands
    assert all("-c constraints.txt" in line for line in installs)
    assert "npm ci" in commands  # the TypeScript harness the suite drives


def test_ci_runs_make_test() -> None:
    assert re.search(r"^make test$", (REPO / ".ci" / "run").read_text(), re.MULTILINE)


def dockerfile() -> str:
    return (REPO / "Dockerfile").read_text()


def test_the_image_installs_the_release_wheel_through_the_constraints() -> None:
    """One artifact for pip users and the image: the wheel `make dist` builds."""
    text = dockerfile()
    [install] = [line for line in text.splitlines() if "pip install" in line]
    assert "-c /tmp/release/constraints.txt" in install
    # The service's wheel and the Python client's of the same version (the service depends
    # on it), each copied by a pattern that matches its own wheel and not the other's.
    [copy_line] = re.findall(r"^COPY (dist/.+) /tmp/release/$", text, re.MULTILINE)
    copied = copy_line.split()
    wheels = [
        f"dist/mcp_eventlog-{__version__}-py3-none-any.whl",
        f"dist/mcp_eventlog_client-{__version__}-py3-none-any.whl",
    ]
    assert len(copied) == len(wheels)
    for wheel, pattern in zip(wheels, copied, strict=True):
        assert [w for w in wheels if fnmatch.fnmatch(w, pattern)] == [wheel]
    assert install.endswith(" ".join(c.replace("dist/", "/tmp/release/") for c in copied))
    assert "[" not in install  # no extras: the MCP SDK is not in the image
    # Nothing of the source tree: what the image runs is what the wheel carries.
    for source in (
        "COPY app",
        "COPY migrations",
        "alembic.ini",
        "pyproject.toml",
        "MIGRATIONS_DIR",
    ):
        assert source not in text
    # `make docker` builds the release first; the builder gets the wheel and constraints.
    assert "docker build" in make_dry_run("docker")
    assert "-m build" in make_dry_run("docker")
    admitted = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in admitted
    assert "!constraints.txt" in admitted
    for pattern in copied:
        assert f"!{pattern}" in admitted


def test_the_image_is_multi_stage_non_root_health_checked_and_does_not_migrate_postgresql() -> None:
    text = dockerfile()
    assert len(re.findall(r"^FROM ", text, re.MULTILINE)) == 2
    [user] = re.findall(r"^USER (\S+)$", text, re.MULTILINE)
    assert user not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*\n.*/readyz", text, re.MULTILINE)
    assert text.rstrip().endswith('CMD ["mcp-eventlog", "serve"]')
    # `serve` follows the dialect (SQLite migrates, PostgreSQL does not): no override.
    assert "EVENTLOG_MIGRATE_ON_START" not in text
