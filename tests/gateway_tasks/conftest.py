"""The gateway as task host, as processes: the conformance fixtures' upstream (the official
Python SDK, no task support: tests/support/upstreams/task_fixtures.py), gateways with
`--tasks` in front of it, and a round-robin balancer without affinity before two of them."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.support.gateway import gateway_process_of
from tests.support.processes import ServerProcess, free_port

# The conformance fixtures as the suite describes them: `greet` is sync-only, the rest run
# as tasks; `failing_job` and `test_tool_with_task` are `required`, and the latter asks for
# its input before the task starts (`+input-first`, SEP-2663's MRTR → task composition).
SPEC = (
    "slow_compute,failing_job=required,protocol_error_job,confirm_delete,multi_input,"
    "test_tool_with_task=required+input-first"
)


def task_upstream(workdir: Path) -> ServerProcess:
    """The fixtures' upstream (not started); its MCP endpoint is `<base_url>/mcp`."""
    port = free_port()
    argv = ["-m", "tests.support.upstreams.task_fixtures", "--port", str(port)]
    server = ServerProcess.program(argv, port=port, log_path=workdir / f"fixtures-{port}.log")
    server.executable = sys.executable
    server.start_timeout = 120.0
    return server


def task_gateway(
    upstream: ServerProcess, database_url: str, workdir: Path, env: Mapping[str, str] = {}
) -> ServerProcess:
    """`mcp-eventlog gateway --upstream … --tasks SPEC` (not started)."""
    server = gateway_process_of(f"{upstream.base_url}/mcp", database_url, workdir, env)
    server.argv = (*server.argv, "--tasks", SPEC)
    server.start_timeout = 120.0
    return server


@contextmanager
def round_robin(*backends: ServerProcess) -> Iterator[ServerProcess]:
    """A balancer sending each request to the next of `backends` in turn."""
    port = free_port()
    argv = ["-m", "tests.support.round_robin", "--port", str(port)]
    argv += [b.base_url for b in backends]
    log = backends[0].log_path.parent / f"balancer-{port}.log"
    server = ServerProcess.program(argv, port=port, log_path=log)
    server.executable = sys.executable
    with server:
        yield server
