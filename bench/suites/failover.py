"""The gateway's failover: two `mcp-eventlog gateway` processes on one PostgreSQL
database with a short writer lease, in front of the bench's SDK server (no event store).

- **Failover**, `rounds` times: a tool call is read by replica A; after its third progress
  notification A is killed (`kill -9`) and the client reconnects to replica B at once
  (`GET` with its `Last-Event-ID`, as the official clients do after a broken stream). B
  replays what was recorded and, once the lease has run out and a sweep has recorded the
  generation abandoned, sends the JSON-RPC error `-32011` (`data.reason: "abandoned"`).
  The figure: the time from the kill to that error on the client, against the bound
  lease + sweep + 1 s. A is started again for the next round.
- **A silent call on a live replica**: a call that says nothing for 3 x lease (plus a
  sweep) between two progress notifications ends in its result, never abandoned.

Raw Streamable HTTP (httpx), as bench/suites/gateway.py. Results go to bench/results/failover.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench import alone
from bench.loads.payload import progress_call
from bench.servers import REPO, ServerProcess, free_port, postgres_available, throwaway_postgres
from bench.suites.gateway import HEADERS, PROTOCOL, _process, _session, say

Results = dict[str, Any]
LEASE_SECONDS = 2
SWEEP_SECONDS = 0.5
BOUND_SECONDS = LEASE_SECONDS + SWEEP_SECONDS + 1
KILL_AFTER = 3  # progress notifications read before the recording replica is killed
GIVE_UP_SECONDS = 30.0  # a reconnect with no error by then is reported as a hang
RESULTS_MD = REPO / "bench" / "results" / "failover.md"


def gateway(name: str, upstream: str, database_url: str, logdir: Path) -> ServerProcess:
    """One gateway process on `database_url` (not started); `start()` again after `kill()`
    restarts it on its port."""
    port = free_port()
    argv = ["-m", "app", "gateway", "--upstream", upstream, "--port", str(port)]
    env = {
        "EVENTLOG_DATABASE_URL": database_url,
        "EVENTLOG_MIGRATE_ON_START": "true",
        "EVENTLOG_LOG_LEVEL": "warning",
        "EVENTLOG_ACCESS_LOG": "false",
        "EVENTLOG_WRITER_LEASE_SECONDS": str(LEASE_SECONDS),
        "EVENTLOG_LEASE_SWEEP_SECONDS": str(SWEEP_SECONDS),
    }
    server = ServerProcess.program(argv, port=port, log_path=logdir / f"{name}-{port}.log", env=env)
    server.ready_path, server.ready_status = "/healthz", None
    server.start_timeout = 90.0
    return server


def mcp_url(gateway: ServerProcess) -> str:
    """The gateway's MCP endpoint."""
    return f"{gateway.base_url}/mcp"


def _call_body(rid: int, n: int, delay: float) -> dict[str, Any]:
    return progress_call(rid, {"n": n, "delay": delay})


def _headers(sid: str, **extra: str) -> dict[str, str]:
    return {**HEADERS, "mcp-protocol-version": PROTOCOL, "mcp-session-id": sid, **extra}


async def _failover_round(first: ServerProcess, second: ServerProcess, rid: int) -> Results:
    """One round: the call read by `first`, `first` killed, the client on `second`."""
    async with httpx.AsyncClient(timeout=GIVE_UP_SECONDS) as http:
        sid = await _session(http, mcp_url(first))
        last_id = None
        progress = 0
        body = _call_body(rid, 1000, 0.05)
        async with http.stream(
            "POST", mcp_url(first), json=body, headers=_headers(sid)
        ) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if line.startswith("id:"):
                    last_id = line[3:].strip()
                elif line.startswith("data:") and "notifications/progress" in line:
                    progress += 1
                    if progress >= KILL_AFTER:
                        break
            first.kill()
            killed = time.monotonic()
        assert last_id is not None, "the gateway gave no event id"
        headers = _headers(sid, **{"last-event-id": last_id})
        headers.pop("content-type")
        error: dict[str, Any] | None = None
        replayed = 0
        with contextlib.suppress(httpx.TransportError, TimeoutError):
            async with (
                asyncio.timeout(GIVE_UP_SECONDS),
                http.stream("GET", mcp_url(second), headers=headers) as response,
            ):
                async for line in response.aiter_lines():
                    if not line.startswith("data:") or len(line) < 7:
                        continue
                    message = json.loads(line[5:])
                    if "method" in message:
                        replayed += 1
                    elif message.get("id") == rid:
                        error = message.get("error")
                        break
        took = time.monotonic() - killed
    if error is None:
        return {"seconds": None, "error": None, "replayed": replayed}
    return {
        "seconds": took,
        "code": error.get("code"),
        "reason": (error.get("data") or {}).get("reason"),
        "replayed": replayed,
    }


async def _silent_call(gateway: ServerProcess) -> Results:
    """Two progress notifications 3 x lease + a sweep apart on a live replica."""
    silence = 3 * LEASE_SECONDS + SWEEP_SECONDS
    async with httpx.AsyncClient(timeout=silence + 30) as http:
        sid = await _session(http, mcp_url(gateway))
        body = _call_body(1, 2, silence)
        began = time.monotonic()
        answer: dict[str, Any] = {}
        async with http.stream(
            "POST", mcp_url(gateway), json=body, headers=_headers(sid)
        ) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:") and len(line) > 6:
                    message = json.loads(line[5:])
                    if message.get("id") == 1:
                        answer = message
                        break
    return {
        "silence_seconds": silence,
        "seconds": time.monotonic() - began,
        "abandoned": "error" in answer,
        "answer": "result" if "result" in answer else answer.get("error"),
    }


@contextlib.contextmanager
def _replicas(workdir: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with contextlib.ExitStack() as stack:
        up_port = free_port()
        argv = [sys.executable, "-m", "bench.baselines.gateway_upstream", "--port", str(up_port)]
        stack.enter_context(_process("failover-upstream", argv, up_port, {}, workdir))
        upstream = f"http://127.0.0.1:{up_port}/mcp"
        database_url = stack.enter_context(throwaway_postgres())
        pair = (
            gateway("failover-a", upstream, database_url, workdir),
            gateway("failover-b", upstream, database_url, workdir),
        )
        for replica in pair:
            replica.start()  # one at a time: the first one migrates the database
            stack.callback(replica.stop)
        yield pair


def suite(plan: Any, workdir: Path) -> Results:
    """`plan.rounds` failovers (at least 2; the killed replica alternates), then the
    silent call on the replica left alive."""
    out: Results = {
        "lease_seconds": LEASE_SECONDS,
        "sweep_seconds": SWEEP_SECONDS,
        "bound_seconds": BOUND_SECONDS,
        "rounds": [],
    }
    if not postgres_available():
        say("failover: PostgreSQL is not answering: skipped")
        out["skipped"] = "PostgreSQL is not answering"
        write_markdown(out)
        return out
    rounds = max(int(getattr(plan, "rounds", 5)), 2)
    say(f"failover: two gateways on PostgreSQL, lease {LEASE_SECONDS} s, {rounds} kills")
    with _replicas(workdir) as (a, b):
        for index in range(rounds):
            # The replica killed last round is the one reconnected to this round: it has
            # had the whole round to come back.
            first, second = (a, b) if index % 2 == 0 else (b, a)
            result = asyncio.run(_failover_round(first, second, 100 + index))
            say(f"  round {index + 1}: {result}")
            out["rounds"].append(result)
            if index < rounds - 1:
                first.start()
        say("failover: a silent call on a live replica")
        out["silent"] = asyncio.run(_silent_call(second))
    write_markdown(out)
    return out


def summary(out: Results) -> Results:
    """Median, min and max of the kill-to-error times, and how many rounds kept the goal."""
    times = [r["seconds"] for r in out["rounds"] if r.get("seconds") is not None]
    visible = [r for r in out["rounds"] if r.get("code") == -32011]
    return {
        "rounds": len(out["rounds"]),
        "visible": len(visible),
        "abandoned": sum(1 for r in visible if r.get("reason") == "abandoned"),
        "median": statistics.median(times) if times else None,
        "min": min(times) if times else None,
        # A round with no error within GIVE_UP_SECONDS is a hang: the maximum says so.
        "max": max(times) if times and len(times) == len(out["rounds"]) else None,
        "within_bound": sum(1 for t in times if t <= out["bound_seconds"]),
    }


def markdown(out: Results | None) -> str:
    """The failover table, as Markdown."""
    if not out or "rounds" not in out:
        return "Gateway failover: not measured in this run."
    if out.get("skipped"):
        return f"Gateway failover: skipped ({out['skipped']})."
    s = summary(out)
    bound = out["bound_seconds"]

    def sec(value: float | None) -> str:
        return "hang" if value is None else f"{value:.2f}"

    silent = out.get("silent", {})
    silent_cell = (
        "not measured"
        if not silent
        else ("**abandoned**" if silent["abandoned"] else "not abandoned (its result came)")
    )
    return "\n".join(
        [
            "# The gateway's failover (`make bench`, bench/suites/failover.py)",
            "",
            f"Two gateways on one PostgreSQL database, writer lease {out['lease_seconds']} s, "
            f"sweep {out['sweep_seconds']} s; the replica reading a call killed (`kill -9`) "
            f"after its {KILL_AFTER}rd progress notification, the client reconnecting to the "
            "other one at once. Taken on a shared 2-core machine "
            f"(load average {out.get('loadavg', [0.0])[0]:.1f}).",
            "",
            "| figure | goal | median | min | max | rounds |",
            "| --- | --- | ---: | ---: | ---: | --- |",
            f"| kill → visible -32011 on the other replica, s | ≤ lease + sweep + 1 s "
            f"= {bound:g} | {sec(s['median'])} | {sec(s['min'])} | {sec(s['max'])} "
            f"| {s['within_bound']}/{s['rounds']} within, {s['abandoned']}/{s['rounds']} "
            '`reason: "abandoned"` |',
            f"| a call silent for 3 x lease + sweep "
            f"({silent.get('silence_seconds', 0):g} s) on a live replica | never abandoned "
            f"| {silent_cell} | | | 1 |",
            "",
        ]
    )


def write_markdown(out: Results) -> None:
    """bench/results/failover.md: this run's table."""
    alone.write_markdown(RESULTS_MD, markdown, out)


def main() -> None:
    """`python -m bench.suites.failover [--quick]`: this suite alone."""
    out = alone.run(suite, "eventlog-bench-failover-", alone.plan(rounds=(2, 5)))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
