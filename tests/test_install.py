"""Installs are reproducible (issue 13.9): one constraints file holds the tested versions,
and `make install`, `make run`, CI and the Docker image all install through it; `make run`
installs only what serving needs (no dev extras, no Node)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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
        assert not re.search(r"\[dev|mcp\]|clients/python", line)
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


def test_the_image_installs_through_the_constraints_and_does_not_migrate_postgresql() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "COPY pyproject.toml README.md constraints.txt ./" in dockerfile
    [install] = [line for line in dockerfile.splitlines() if "pip install" in line]
    assert "-c constraints.txt" in install
    assert "[" not in install  # the service alone, no extras
    # `serve` follows the dialect (SQLite migrates, PostgreSQL does not): no override.
    assert "EVENTLOG_MIGRATE_ON_START" not in dockerfile
    assert "constraints.txt" not in (REPO / ".dockerignore").read_text()
