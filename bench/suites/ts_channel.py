"""The TypeScript store over the append channel ÷ the service's own REST append, p50.

The goal: `EventLogEventStore.storeEvent` p50 (TypeScript, over the channel) ≤ 1.0x
the service's own REST append p50 (one connection, one event per request, wrk). One
service process on SQLite (`synchronous=FULL`, the defaults); in each interleaved round:
wrk's REST append p50 on one connection, then the TypeScript store (a Node process,
`clients/typescript/bench/channel.ts`) storing progress notifications one at a time on one
stream over the channel, then the same store over REST (for reference). Median and range of
the rounds; JSON and a table in `bench/results/ts-channel.{json,md}`.

`python -m bench.suites.ts_channel [--quick]` runs it alone; `make bench` runs it with the rest
(`bench/run.py`). The machine is shared: every figure says it was taken under that load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import alone, seed, servers
from bench.loads import wrk
from bench.plan import Plan
from bench.ratios import spread
from bench.suites.append_cost import open_generations

PACKAGE = servers.REPO / "clients" / "typescript"
RESULTS = servers.REPO / "bench" / "results"
NODE_TIMEOUT_S = 300

Results = dict[str, Any]


def say(message: str) -> None:
    """Progress on stderr."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def available() -> str | None:
    """Why the TypeScript side cannot run (no node or npm), or None."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


def _tool(name: str) -> str:
    return shutil.which(name) or name


def _build() -> None:
    if not (PACKAGE / "node_modules").is_dir():
        subprocess.run(  # noqa: S603 (npm from the PATH, fixed arguments)
            [_tool("npm"), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=PACKAGE,
            check=True,
            timeout=NODE_TIMEOUT_S,
        )
    subprocess.run(  # noqa: S603
        [_tool("npx"), "tsc", "-p", "tsconfig.test.json"],
        cwd=PACKAGE,
        check=True,
        timeout=NODE_TIMEOUT_S,
    )


def _store(url: str, transport: str, messages: int, *, bare: bool) -> Results:
    argv = [_tool("node"), "build/bench/channel.js", "--url", url, "--transport", transport]
    argv += ["--messages", str(messages), "--warmup", str(max(50, messages // 5))]
    if bare:
        argv.append("--bare")
    return node_json(argv, "the TypeScript bench", NODE_TIMEOUT_S)


def node_json(argv: list[str], what: str, timeout: float) -> Results:
    """Run a built Node bench script (`argv`, in the package); the last JSON line it printed."""
    done = subprocess.run(  # noqa: S603 (node from the PATH, our own script)
        argv, cwd=PACKAGE, capture_output=True, text=True, timeout=timeout, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{what} failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    result: Results = json.loads(lines[-1])
    return result


def suite(plan: Plan, workdir: Path) -> Results:
    """The rounds, on one SQLite service."""
    why = available()
    if why is not None:
        say(f"TypeScript channel bench skipped: {why}")
        return {"skipped": why}
    rounds = max(2, plan.rounds // 2)
    messages = 500 if plan.name == "full" else 200
    seconds = max(1.0, plan.latency_seconds)
    _build()
    url = f"sqlite+aiosqlite:///{workdir}/ts-channel.db"
    seed.migrate(url)
    out: Results = {
        "load": wrk.tool(),
        "load_fallback_reason": wrk.fallback_reason(),
        "messages_per_round": messages,
        "rounds": [],
        "machine": {"cpus": os.cpu_count(), "loadavg_before": os.getloadavg()},
        "note": "taken on a shared 2-core machine under the other engineers' load",
    }
    with servers.service(url, workdir, name="service-ts-channel") as service:
        base = f"http://127.0.0.1:{service.port}"
        tokens = open_generations(service.port, "ts-rest", rounds)
        for i in range(rounds):
            say(f"TypeScript store over the channel vs REST append p50, round {i + 1}/{rounds}")
            rest = wrk.append(service.port, [tokens[i]], batch=1, seconds=seconds)
            channel = _store(base, "channel", messages, bare=True)
            over_rest = _store(base, "rest", messages, bare=False)
            out["rounds"].append({"rest_append": rest, "channel": channel, "store_rest": over_rest})
    rows = out["rounds"]
    rest_p50 = [r["rest_append"]["p50_ms"] for r in rows]
    channel_p50 = [r["channel"]["store"]["p50_ms"] for r in rows]
    bare_p50 = [r["channel"]["bare"]["p50_ms"] for r in rows]
    store_rest_p50 = [r["store_rest"]["store"]["p50_ms"] for r in rows]
    out["summary"] = {
        "rest_append_p50_ms": spread(rest_p50),
        "store_channel_p50_ms": spread(channel_p50),
        "bare_channel_append_p50_ms": spread(bare_p50),
        "store_rest_p50_ms": spread(store_rest_p50),
        "ratio_store_channel_to_rest_append": spread(
            [c / r for c, r in zip(channel_p50, rest_p50, strict=True)]
        ),
        "ratio_store_rest_to_rest_append": spread(
            [c / r for c, r in zip(store_rest_p50, rest_p50, strict=True)]
        ),
        "client_cpu_ms_per_message_channel": spread(
            [r["channel"]["client_cpu_ms_per_message"] for r in rows]
        ),
        "client_cpu_ms_per_message_rest": spread(
            [r["store_rest"]["client_cpu_ms_per_message"] for r in rows]
        ),
        "unstored": sum(r["channel"]["unstored"] + r["store_rest"]["unstored"] for r in rows),
        "channel_fallbacks": sum(r["channel"]["channel_fallbacks"] for r in rows),
        "goal": "store_channel_p50 / rest_append_p50 <= 1.0",
    }
    out["machine"]["loadavg_after"] = os.getloadavg()
    return out


def table(result: Results) -> str:
    """The summary as a Markdown table."""
    if "summary" not in result:
        return f"TypeScript channel bench skipped: {result.get('skipped')}\n"
    s = result["summary"]

    def cell(key: str, unit: str = " ms") -> str:
        v = s[key]
        return f"{v['median']:.3f}{unit} ({v['min']:.3f}-{v['max']:.3f})"

    lines = [
        f"TypeScript `EventLogEventStore.storeEvent`, one stream, one message at a time, "
        f"SQLite FULL; {len(result['rounds'])} interleaved rounds of "
        f"{result['messages_per_round']} messages; REST load: {result['load']}; "
        f"{result['note']} (load average {result['machine']['loadavg_before'][0]:.2f} before, "
        f"{result['machine']['loadavg_after'][0]:.2f} after).",
        "",
        "| figure | p50, median (range) |",
        "|---|---|",
        f"| service's own REST append, 1 connection ({result['load']}) | "
        f"{cell('rest_append_p50_ms')} |",
        f"| store over the channel | {cell('store_channel_p50_ms')} |",
        f"| bare `AppendChannel.append` | {cell('bare_channel_append_p50_ms')} |",
        f'| store over REST (`appendTransport: "rest"`) | {cell("store_rest_p50_ms")} |',
        f"| **store over the channel ÷ REST append** (goal ≤ 1.0x) | "
        f"{cell('ratio_store_channel_to_rest_append', 'x')} |",
        f"| store over REST ÷ REST append | {cell('ratio_store_rest_to_rest_append', 'x')} |",
        f"| Node CPU per stored message, channel | {cell('client_cpu_ms_per_message_channel')} |",
        f"| Node CPU per stored message, REST | {cell('client_cpu_ms_per_message_rest')} |",
        "",
        f"Messages unstored: {s['unstored']}; appends that fell back to REST: "
        f"{s['channel_fallbacks']}.",
    ]
    return "\n".join(lines) + "\n"


def write_results(name: str, result: Results, markdown: str) -> Path:
    """`bench/results/<name>.json` (the result) and `<name>.md` (its table); the latter's path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    path = RESULTS / f"{name}.md"
    path.write_text(markdown)
    return path


def write(result: Results) -> Path:
    """`bench/results/ts-channel.json` and `.md`."""
    return write_results("ts-channel", result, table(result))


def main() -> int:
    """Run the suite alone, print and write its table."""
    parser = argparse.ArgumentParser(prog="bench.suites.ts_channel", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = alone.run(suite, "eventlog-bench-", alone.plan(args.quick))
    write(result)
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
