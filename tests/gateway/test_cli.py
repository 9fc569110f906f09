"""`mcp-eventlog gateway`: the command line's part."""

from __future__ import annotations

import subprocess
import sys

from tests.support.processes import REPO, child_environment


def test_the_gateway_needs_an_upstream() -> None:
    env = child_environment({})
    env.pop("EVENTLOG_GATEWAY_UPSTREAM", None)
    done = subprocess.run(
        [sys.executable, "-m", "app", "gateway", "--port", "0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert b"gateway needs --upstream URL" in done.stderr


def test_the_gateway_is_a_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", "gateway", "--help"],
        cwd=REPO,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert b"--upstream" in done.stdout
    assert b"--path" in done.stdout
