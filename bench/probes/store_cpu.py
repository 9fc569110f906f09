"""CPU per stored notification: the official Python SDK server with `EventLogEventStore`.

`python -m bench.probes.store_cpu [--calls 15] [--notifications 200]`: the
store path profiled end to end. One service process (SQLite `FULL`); the SDK server
(`bench.baselines.sdk_server`) with no store, then with `EventLogEventStore` pipelined (the default)
and per event, over the append channel (`--stores`: any of `bench.suites.mcp_overhead`'s); one
session calling the `progress` tool one call after another. For each,
the CPU-seconds (user + system) per 1,000 notifications of the service, the MCP server and
the client (this process), from their `/proc` times; then, on the same service, the CPU of
one REST append at a time under wrk (one connection: one append per transaction, as a
call's messages are — the SDK awaits each `store_event` before it sends the message).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import anyio
import psutil  # type: ignore[import-untyped]

from bench import seed
from bench.loads import wrk
from bench.suites import append_cost, mcp_overhead


def _pid_listening(port: int) -> int:
    for connection in psutil.net_connections("tcp"):
        if connection.laddr and connection.laddr.port == port and connection.status == "LISTEN":
            return int(connection.pid)
    raise RuntimeError(f"nothing listens on {port}")


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def main() -> None:
    """Print the table (see the module)."""
    parser = argparse.ArgumentParser(prog="bench.probes.store_cpu", description=__doc__)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--notifications", type=int, default=200)
    parser.add_argument(
        "--stores",
        default="none,eventlog-pipelined,eventlog-per_event",
        help="comma list of bench.suites.mcp_overhead's SDK stores",
    )
    args = parser.parse_args()
    n, calls = args.notifications, args.calls
    print(f"CPU-seconds per 1,000 notifications ({calls} calls of {n}, one at a time):")
    with tempfile.TemporaryDirectory(prefix="eventlog-bench-cpu-") as workdir:
        url = f"sqlite+aiosqlite:///{workdir}/cpu.db"
        seed.migrate(url)
        with mcp_overhead.service(url, "FULL") as eventlog:
            port = int(eventlog.rstrip("/").rsplit(":", 1)[1])
            service, client = psutil.Process(_pid_listening(port)), psutil.Process()
            for store in args.stores.split(","):
                with mcp_overhead.sdk_server(store, eventlog) as mcp:
                    mcp_port = int(mcp.split(":")[2].split("/")[0])
                    server = psutil.Process(_pid_listening(mcp_port))
                    anyio.run(mcp_overhead._calls, mcp, n, 1, 1)  # warm-up
                    before = [_cpu(p) for p in (service, server, client)]
                    began = time.perf_counter()
                    anyio.run(mcp_overhead._calls, mcp, n, 1, calls)
                    wall = time.perf_counter() - began
                    after = [_cpu(p) for p in (service, server, client)]
                    # _calls makes a warm-up call, `calls` timed ones and one "concurrent" one.
                    notes = n * (calls + 2)
                    per = [(b - a) / notes * 1000 for a, b in zip(before, after, strict=True)]
                    print(
                        f"  {store:<17} service {per[0]:.2f}  MCP server {per[1]:.2f}  "
                        f"client {per[2]:.2f}  ({wall:.1f} s)",
                        flush=True,
                    )
            tokens = append_cost.open_generations(port, "cpu", 1)
            before_append = _cpu(service)
            load = wrk.append(port, tokens, batch=1, seconds=5)
            per_append = (_cpu(service) - before_append) / load["requests"] * 1000
            print(
                f"  the service's CPU per REST append, one at a time (wrk, 1 connection): "
                f"{per_append:.2f} ms ({load['requests']:,} appends)"
            )


if __name__ == "__main__":
    main()
