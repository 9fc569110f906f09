"""`mcp-eventlog gateway`: the command line's part, `--tasks SPEC` included (the spec's
grammar is `test_task_spec.py`'s)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.processes import REPO, child_environment


def gateway_command(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`python -m app gateway ARGS` run to its end from the checkout."""
    return subprocess.run(
        [sys.executable, "-m", "app", "gateway", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_the_gateway_needs_an_upstream() -> None:
    env = child_environment({})
    env.pop("EVENTLOG_GATEWAY_UPSTREAM", None)
    done = gateway_command("--port", "0", env=env)
    assert done.returncode == 2
    assert b"gateway needs --upstream URL" in done.stderr


def test_the_gateway_is_a_command() -> None:
    done = gateway_command("--help")
    assert done.returncode == 0
    assert b"--upstream" in done.stdout
    assert b"--path" in done.stdout


def test_the_command_refuses_a_bad_spec_before_starting() -> None:
    env = child_environment({})
    flags = ["--upstream", "http://127.0.0.1:9/mcp", "--port", "0", "--tasks", "slow=sometimes"]
    done = gateway_command(*flags, env=env)
    assert done.returncode == 2
    assert b"--tasks: not a task tool entry: 'slow=sometimes'" in done.stderr


def test_the_command_offers_tasks() -> None:
    done = gateway_command("--help")
    assert b"--tasks SPEC" in done.stdout
