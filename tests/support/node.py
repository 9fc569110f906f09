"""Node programs of the test suite: a folder with its own `package.json` and lock file,
installed (`npm ci`) on first use and again whenever a locked version is not what is there."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.support.needs import missing


def ensure_node_project(folder: Path, packages: Mapping[str, str], what: str) -> str:
    """The path of `node`, with `folder`'s dependencies installed at `packages`' versions."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing(f"Node and npm for {what}", "node or npm is not on PATH")
    if not all(_installed(folder, name) == version for name, version in packages.items()):
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=folder,
            check=True,
            timeout=300,
        )
    return node


def _installed(folder: Path, package: str) -> str | None:
    manifest = folder / "node_modules" / package / "package.json"
    if not manifest.exists():
        return None
    version: str = json.loads(manifest.read_text())["version"]
    return version
