"""The TypeScript SDK server with the pipelined store, the per-event store and no store.

The TypeScript rows: the TypeScript SDK's server (`clients/typescript/bench/
sdk-server.ts`, both lines: `@modelcontextprotocol/sdk` 1.x and `@modelcontextprotocol/
server` 2.x) serving one tool that streams `n` progress notifications, with no event store,
with `EventLogEventStore` pipelined (its default) and with `durability: "per_event"`, each
server a Node process of its own, on one service process on SQLite (`synchronous=FULL`, the
defaults). In each interleaved round every server is called by the same Node driver
(`clients/typescript/bench/sdk-calls.ts`, the SDK 1.x client): the median of 5 calls of 200
notifications one after another, then the notifications/s of 16 such calls at once (16
sessions). The ratios are to the store-less server of the same SDK line in the same round;
median and range of the rounds. Goals: pipelined one call ÷ none ≤ 1.5x, pipelined 16 calls
notifications/s ÷ none ≥ 0.5x.

`python -m bench.suites.ts_sdk_server [--quick]` runs it alone (JSON and a table in
`bench/results/ts-sdk-server.{json,md}`); `make bench` runs it with the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import alone, seed, servers
from bench.plan import Plan
from bench.ratios import spread
from bench.suites import ts_channel

PACKAGE = ts_channel.PACKAGE
RESULTS = ts_channel.RESULTS
SDKS = ("v1", "v2")
STORES = ("none", "pipelined", "per_event")
START_TIMEOUT_S = 60
CALL_TIMEOUT_S = 300

Results = dict[str, Any]
say = ts_channel.say


@contextlib.contextmanager
def sdk_server(sdk: str, store: str, eventlog: str, logdir: Path) -> Iterator[str]:
    """`sdk-server.js` for one SDK line and store on a free port; yields its MCP URL."""
    port = servers.free_port()
    argv = [ts_channel._tool("node"), "build/bench/sdk-server.js", "--port", str(port)]
    argv += ["--sdk", sdk, "--store", store, "--eventlog", eventlog]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOG_")}
    log = logdir / f"ts-sdk-{sdk}-{store}-{port}.log"
    with log.open("wb") as out:
        child = subprocess.Popen(  # noqa: S603 (node from the PATH, our own script)
            argv, cwd=PACKAGE, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if child.poll() is not None:
                raise RuntimeError(f"the {sdk}/{store} SDK server exited; see {log}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {sdk}/{store} SDK server did not listen; see {log}")
            time.sleep(0.1)  # polling a process: there is no event to await
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)


def _calls(url: str, notifications: int, concurrent: int, single: int) -> Results:
    argv = [ts_channel._tool("node"), "build/bench/sdk-calls.js", "--url", url]
    argv += ["--notifications", str(notifications), "--concurrent", str(concurrent)]
    argv += ["--single", str(single)]
    return ts_channel.node_json(argv, "the SDK calls", CALL_TIMEOUT_S)


def suite(plan: Plan, workdir: Path, *, notifications: int = 200, concurrent: int = 16) -> Results:
    """The rounds, on one SQLite service; every server up at once, called in turn."""
    why = ts_channel.available()
    if why is not None:
        say(f"TypeScript SDK server bench skipped: {why}")
        return {"skipped": why}
    rounds = max(2, plan.rounds // 2)
    single = 5 if plan.name == "full" else 3
    ts_channel._build()
    url = f"sqlite+aiosqlite:///{workdir}/ts-sdk-server.db"
    seed.migrate(url)
    out: Results = {
        "notifications": notifications,
        "concurrent": concurrent,
        "single_calls": single,
        "rounds": [],
        "machine": {"cpus": os.cpu_count(), "loadavg_before": os.getloadavg()},
        "note": "taken on a shared 2-core machine under the other engineers' load",
    }
    with (
        servers.service(url, workdir, name="service-ts-sdk") as service,
        contextlib.ExitStack() as stack,
    ):
        eventlog = f"http://127.0.0.1:{service.port}"
        urls = {
            (sdk, store): stack.enter_context(sdk_server(sdk, store, eventlog, workdir))
            for sdk in SDKS
            for store in STORES
        }
        for i in range(rounds):
            say(f"TypeScript SDK server, none / pipelined / per-event, round {i + 1}/{rounds}")
            row: Results = {}
            for (sdk, store), mcp in urls.items():
                row[f"{sdk}/{store}"] = _calls(mcp, notifications, concurrent, single)
            out["rounds"].append(row)
    out["summary"] = _summary(out["rounds"])
    out["machine"]["loadavg_after"] = os.getloadavg()
    return out


def _summary(rows: list[Results]) -> Results:
    summary: Results = {}
    for sdk in SDKS:
        base_one = [r[f"{sdk}/none"]["single_ms"] for r in rows]
        base_rate = [r[f"{sdk}/none"]["notifications_per_s"] for r in rows]
        for store in STORES:
            one = [r[f"{sdk}/{store}"]["single_ms"] for r in rows]
            rate = [r[f"{sdk}/{store}"]["notifications_per_s"] for r in rows]
            summary[f"{sdk}/{store}"] = {
                "single_ms": spread(one),
                "single_over_none": spread([a / b for a, b in zip(one, base_one, strict=True)]),
                "notifications_per_s": spread(rate),
                "rate_of_none": spread([a / b for a, b in zip(rate, base_rate, strict=True)]),
            }
    return summary


def table(result: Results) -> str:
    """The summary as a Markdown table."""
    if "summary" not in result:
        return f"TypeScript SDK server bench skipped: {result.get('skipped')}\n"
    s = result["summary"]

    def cell(v: dict[str, float], form: str) -> str:
        return f"{v['median']:{form}} ({v['min']:{form}}-{v['max']:{form}})"

    lines = [
        f"TypeScript SDK server, one tool call streaming {result['notifications']} progress "
        f"notifications (median of {result['single_calls']} calls) and "
        f"{result['concurrent']} such calls at once; {len(result['rounds'])} interleaved "
        f"rounds, median (range); service on SQLite FULL; {result['note']} (load average "
        f"{result['machine']['loadavg_before'][0]:.2f} before, "
        f"{result['machine']['loadavg_after'][0]:.2f} after).",
        "",
        f"| SDK | store | one call, ms | ÷ no store (goal pipelined ≤ 1.5x) | "
        f"{result['concurrent']} calls, notifications/s | of no store (goal pipelined ≥ 0.5x) |",
        "|---|---|---|---|---|---|",
    ]
    for key, v in s.items():
        sdk, store = key.split("/")
        lines.append(
            f"| {sdk} | {store} | {cell(v['single_ms'], '.1f')} | "
            f"{cell(v['single_over_none'], '.2f')}x | {cell(v['notifications_per_s'], '.0f')} | "
            f"{cell(v['rate_of_none'], '.2f')}x |"
        )
    return "\n".join(lines) + "\n"


def write(result: Results) -> Path:
    """`bench/results/ts-sdk-server.json` and `.md`."""
    return ts_channel.write_results("ts-sdk-server", result, table(result))


def main() -> int:
    """Run the suite alone, print and write its table."""
    parser = argparse.ArgumentParser(prog="bench.suites.ts_sdk_server", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--notifications", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=16)
    args = parser.parse_args()
    result = alone.run(
        suite,
        "eventlog-bench-",
        alone.plan(args.quick),
        notifications=args.notifications,
        concurrent=args.concurrent,
    )
    write(result)
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
