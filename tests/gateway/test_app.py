"""SIGTERM with calls in flight (real processes, SQLite): a healthy upstream's call
finishes within `EVENTLOG_GATEWAY_SHUTDOWN_GRACE_SECONDS` and its client gets the answer;
shutdown takes the grace at most (plus a little), whatever else is open (the client's
standalone GET stream never ends by itself), and logs no traceback."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.gateway.clients import Progress, call_progress, mcp_client, text_of
from tests.support.gateway import gateway_process_of, python_upstream
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.process

GRACE = 6.0


async def stop_at_first_step(
    gateway: ServerProcess, progress: Progress, stopped: list[float]
) -> None:
    """SIGTERM the gateway once the call reported step 1 and wait for it to exit; the
    seconds that took, into `stopped`."""
    await progress.at(1).wait()
    started = time.monotonic()
    await anyio.to_thread.run_sync(gateway.stop)
    stopped.append(time.monotonic() - started)


async def test_sigterm_lets_a_healthy_call_finish_within_the_grace(tmp_path: Path) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}"
    env = {"EVENTLOG_GATEWAY_SHUTDOWN_GRACE_SECONDS": str(GRACE)}
    with python_upstream(tmp_path) as upstream:
        gateway = gateway_process_of(f"{upstream.base_url}/mcp", database, tmp_path, env)
        with gateway:
            progress = Progress()
            results = []
            stopped: list[float] = []
            async with mcp_client(f"{gateway.base_url}/mcp", end_session=False) as (
                session,
                _,
                _,
            ):
                with anyio.fail_after(30):
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(stop_at_first_step, gateway, progress, stopped)
                        # About 2 s of work after the signal: well within the grace.
                        results.append(await call_progress(session, progress, n=5, delay=0.5))
            log = gateway.log()
    assert text_of(results[0]) == "counted to 5"
    assert stopped[0] < GRACE + 2.0, stopped
    assert "Traceback" not in log
    assert "CancelledError" not in log


async def test_a_call_longer_than_the_grace_is_failed_visibly_by_its_end(tmp_path: Path) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}"
    env = {"EVENTLOG_GATEWAY_SHUTDOWN_GRACE_SECONDS": "2"}
    with python_upstream(tmp_path) as upstream:
        gateway = gateway_process_of(f"{upstream.base_url}/mcp", database, tmp_path, env)
        with gateway:
            progress = Progress()
            stopped: list[float] = []
            async with mcp_client(f"{gateway.base_url}/mcp", end_session=False) as (
                session,
                _,
                _,
            ):
                failures: list[MCPError] = []
                with anyio.fail_after(30):
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(stop_at_first_step, gateway, progress, stopped)
                        try:
                            # Paused at step 1 until a gate nobody opens: longer than the grace.
                            await call_progress(session, progress, n=3, pause_at=1, tag="long")
                        except MCPError as error:
                            failures.append(error)
            log = gateway.log()
    assert failures, "the call ended without an error"
    assert failures[0].error.code == -32011
    assert failures[0].error.data["reason"] == "upstream_lost"
    assert stopped[0] < 2 + 2.0, stopped
    assert "Traceback" not in log
