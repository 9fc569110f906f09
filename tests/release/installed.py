"""The release as a user gets it: the artifacts `make dist` builds, each installed outside
the repository, and the installed programs run from there.

The programs started here never reach the checkout's code: they get an environment
without `PYTHONPATH`, `EVENTLOG_*` or a virtual environment of ours, and a working
directory in a temporary folder, so a file the artifacts lack is missing for them as it
would be for a user.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.processes import REPO, ServerProcess, free_port

START_TIMEOUT = 60.0  # seconds: a fresh environment compiles its bytecode on first import
PIP = ("-m", "pip", "--disable-pip-version-check")


def client_version() -> str:
    """The Python client's version: its pyproject.toml, the package's one source."""
    project = tomllib.loads((REPO / "clients" / "python" / "pyproject.toml").read_text())
    version: str = project["project"]["version"]
    return version


def npm_package() -> dict[str, object]:
    """clients/typescript/package.json: the TypeScript package's name, version, peers."""
    package: dict[str, object] = json.loads(
        (REPO / "clients" / "typescript" / "package.json").read_text()
    )
    return package


def npm_version() -> str:
    """The TypeScript package's version: its package.json, the package's one source."""
    return str(npm_package()["version"])


@dataclass(frozen=True)
class Release:
    """The folder `make dist` built into, and each artifact in it."""

    folder: Path

    def only(self, pattern: str) -> Path:
        """The one file of the folder matching `pattern` (it is an error to have two)."""
        [path] = sorted(self.folder.glob(pattern))
        return path

    @property
    def service_wheel(self) -> Path:
        """The service's wheel (what pip users and the Docker image install)."""
        return self.only("mcp_eventlog-*-py3-none-any.whl")

    @property
    def client_wheel(self) -> Path:
        """The Python client's wheel."""
        return self.only("mcp_eventlog_client-*-py3-none-any.whl")

    @property
    def npm_tarball(self) -> Path:
        """The TypeScript package, as `npm pack` makes it."""
        return self.only("mcp-eventlog-*.tgz")


def build_release(folder: Path) -> Release:
    """`make dist DIST=folder`: the release target itself, not a copy of its commands."""
    # A make of its own: not a sub-make of `make test` (whose jobserver it cannot reach).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "--no-print-directory", "-j3", "dist", f"DIST={folder}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"make dist failed:\n{done.stdout}\n{done.stderr}"
    return Release(folder)


def user_environment(**extra: str) -> dict[str, str]:
    """This process's environment without anything that would reach the checkout."""
    # PYTHONDONTWRITEBYTECODE too: a user's Python caches what it compiles (and the
    # environments are installed without compiling), so each program after the first of an
    # environment starts in about a second instead of compiling everything again.
    dropped = (
        "PYTHONPATH",
        "VIRTUAL_ENV",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONDONTWRITEBYTECODE",
    )
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in dropped and not name.startswith("EVENTLOG_")
    }
    env.update(extra)
    return env


def fresh_virtualenv(where: Path, *requirements: str) -> Path:
    """A new virtual environment at `where` with `requirements` installed; its python.

    The environment is made without pip of its own and installed into by this
    interpreter's pip (`pip --python`): the same pip a user runs, a few seconds less per
    environment. The constraints are the release's tested versions (README, "Installing
    a release").
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    done = subprocess.run(
        [
            sys.executable,
            *PIP,
            "--python",
            str(python),
            "install",
            "--quiet",
            # Python compiles what it imports as it runs; compiling every module of every
            # package up front would be most of an install's time here.
            "--no-compile",
            "-c",
            str(REPO / "constraints.txt"),
            *requirements,
        ],
        cwd=where,
        env=user_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"pip install {requirements} failed:\n{done.stderr}"
    return python


def fresh_npm_project(folder: Path, release: Release) -> Path:
    """A new npm project in `folder` that installed the tarball and the MCP SDK.

    The SDK is the package's optional peer, at the version its tests ran on.
    """
    peers = npm_package()["devDependencies"]
    assert isinstance(peers, dict)
    sdk = peers["@modelcontextprotocol/sdk"]
    npm_install = ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"]
    for argv in (
        ["npm", "init", "-y"],
        [*npm_install, str(release.npm_tarball), f"@modelcontextprotocol/sdk@{sdk}"],
    ):
        done = run(argv, folder)
        assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return folder


def run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run an installed program to its end, in `cwd`, with the user's environment."""
    return subprocess.run(
        argv, cwd=cwd, env=user_environment(**env), capture_output=True, text=True, timeout=120
    )


@contextmanager
def running(
    argv: list[str], cwd: Path, ready_url: str, *, any_answer: bool = False, **env: str
) -> Iterator[Path]:
    """Run a server program until the block ends; ready once `ready_url` answers 2xx (or,
    with `any_answer`, anything at all: an MCP server has no health route).

    Yields the path of its log (stdout and stderr). The one server-process helper
    (`ServerProcess`), started in `cwd` with the user's environment.
    """
    ready = urlsplit(ready_url)
    assert ready.hostname == "127.0.0.1", ready_url
    assert ready.port is not None, ready_url
    log = cwd / f"{Path(argv[0]).name}-{time.monotonic_ns()}.log"
    server = ServerProcess.program(argv[1:], port=ready.port, log_path=log, env=env)
    server.executable, server.cwd = argv[0], cwd
    server.environment = _user_environment
    server.ready_path = ready.path or "/"
    server.ready_status = None if any_answer else 200
    server.start_timeout = START_TIMEOUT
    with server:
        yield log


def _user_environment(env: Mapping[str, str]) -> dict[str, str]:
    return user_environment(**env)


@contextmanager
def installed_service(python: Path, cwd: Path, **env: str) -> Iterator[str]:
    """The installed service's own console script, `serve` on a free port; its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    script = str(python.parent / "mcp-eventlog")
    with running([script, "serve", "--port", str(port)], cwd, f"{url}/healthz", **env):
        yield url


def readme_section(heading: str) -> str:
    """The README from `## heading` to the next `## `."""
    readme = (REPO / "README.md").read_text()
    section = readme.split(f"\n## {heading}\n", 1)[1]
    return section.split("\n## ", 1)[0]


def first_block(markdown: str, language: str) -> str:
    """The first fenced block of `language` in `markdown`."""
    match = re.search(rf"```{language}\n(.*?)```", markdown, re.DOTALL)
    assert match is not None, f"no {language} block"
    return match.group(1)
