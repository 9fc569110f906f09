"""The gateway as task host: two `mcp-eventlog gateway --tasks SPEC` processes on
one PostgreSQL database, in front of the conformance fixtures' upstream (the official Python
SDK, no task support; tests/support/upstreams/task_fixtures.py, started as a program).

Interleaved rounds, each side measured in the same round (one requester, one connection,
one request at a time; the sides' order alternates between rounds):

- **Creation**: a task of `greet` created through replica A (`tools/call` from a requester
  that declared `io.modelcontextprotocol/tasks`, answered with the `CreateTaskResult` once
  the task is committed) against the same `greet` called synchronously through A (a
  requester that did not declare the extension: the call forwarded and answered). Goal:
  ≤ 1.5x. Beside them, the bare REST `POST /v1/tasks` on A: the durable create alone.
- **Polling**: `tasks/get` of a completed task on B (which did not create it) against on A
  (which did). Goal: ≤ 1.2x.
- **Throughput**: `tasks` tasks of `greet` created and polled to completion by 16
  concurrent requesters, each creating on A or B in turn and polling on the other replica
  (no affinity), every `POLL_SECONDS`: total time and tasks/s.

Raw JSON-RPC over HTTP (httpx), as the conformance suite's client sends it. Results go to
bench/results/tasks.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench import alone
from bench.servers import REPO, free_port, postgres_available, throwaway_postgres
from bench.suites.gateway import _process, say

Results = dict[str, Any]
EXTENSION = "io.modelcontextprotocol/tasks"
SPEC = "greet,slow_compute"  # both optional: a requester that did not declare runs them sync
UPSTREAM_SCRIPT = REPO / "tests" / "support" / "upstreams" / "task_fixtures.py"
CONCURRENCY = 16
POLL_SECONDS = 0.05  # the requesters' poll interval in the throughput run
CREATE_GOAL = 1.5
GET_GOAL = 1.2
RESULTS_MD = REPO / "bench" / "results" / "tasks.md"
_ids = itertools.count(1)


def _request(
    method: str, params: dict[str, Any], *, declared: bool
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one 2026-07-28 request (`declared`: the extension declared)."""
    capabilities: dict[str, Any] = {"extensions": {EXTENSION: {}}} if declared else {}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    body = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": method,
        "params": {**params, "_meta": meta},
    }
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    if method == "tools/call":
        headers["mcp-name"] = str(params["name"])
    elif method.startswith("tasks/"):
        headers["mcp-name"] = str(params["taskId"])
    return json.dumps(body).encode(), headers


async def _ask(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], *, declared: bool = True
) -> dict[str, Any]:
    """POST one request; its JSON-RPC `result` (an error raises)."""
    body, headers = _request(method, params, declared=declared)
    response = await http.post(url, content=body, headers=headers)
    response.raise_for_status()
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    answer: dict[str, Any] = json.loads(text)
    if "result" not in answer:
        raise RuntimeError(f"{method} on {url}: {answer}")
    result: dict[str, Any] = answer["result"]
    return result


GREET = {"name": "greet", "arguments": {"name": "bench"}}


async def _sync_greet(http: httpx.AsyncClient, url: str) -> None:
    result = await _ask(http, url, "tools/call", GREET, declared=False)
    assert result["content"][0]["text"] == "Hello, bench!", result


async def _create(http: httpx.AsyncClient, url: str) -> str:
    result = await _ask(http, url, "tools/call", GREET)
    assert result["resultType"] == "task", result
    task_id: str = result["taskId"]
    return task_id


async def _get(http: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    return await _ask(http, url, "tasks/get", {"taskId": task_id})


async def _rest_create(http: httpx.AsyncClient, base: str) -> None:
    body = {"principal": None, "ttl_ms": 600_000, "poll_interval_ms": None, "request": None}
    response = await http.post(f"{base}/v1/tasks", json=body)
    assert response.status_code == 201, response.text


async def _settled(http: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    while (task := await _get(http, url, task_id))["status"] in ("working", "input_required"):  # noqa: ASYNC110 (another process's state)
        await asyncio.sleep(POLL_SECONDS)
    return task


async def _settled_now(http: httpx.AsyncClient, url: str, task_id: str) -> None:
    """Poll `task_id` back to back until it settled: the processes stay busy (warm), as
    between the calls of the other sides, instead of sleeping between polls."""
    while (await _get(http, url, task_id))["status"] in ("working", "input_required"):
        pass


async def _times(n: int, call: Any, after: Any = None) -> list[float]:
    """`n` sequential calls of `call()`, each followed (untimed) by `after(its result)`:
    each call's milliseconds."""
    out = []
    for _ in range(n):
        began = time.perf_counter()
        result = await call()
        out.append((time.perf_counter() - began) * 1000)
        if after is not None:
            await after(result)
    return out


async def _latency_rounds(a: str, b: str, database_url: str, rounds: int, n: int) -> Results:
    """Interleaved rounds of the latencies; per round each side's median (ms)."""
    import asyncpg

    mcp_a, mcp_b = f"{a}/mcp", f"{b}/mcp"
    per_round: list[dict[str, float]] = []
    pg = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    await pg.execute("CREATE TABLE bench_commit (n integer)")
    async with httpx.AsyncClient(timeout=30) as http:
        # Warm-up: connections, the upstream's first calls, the plans of the task queries.
        for _ in range(5):
            await _sync_greet(http, mcp_a)
            await _create(http, mcp_a)
            await _rest_create(http, a)
        polled = await _create(http, mcp_a)
        await _settled(http, mcp_a, polled)
        for _ in range(5):
            await _get(http, mcp_a, polled)
            await _get(http, mcp_b, polled)

        async def settle(task_id: str) -> None:
            await _settled_now(http, mcp_a, task_id)

        sides: dict[str, Any] = {
            "sync_greet": lambda: _sync_greet(http, mcp_a),
            "task_create": lambda: _create(http, mcp_a),
            # The same, each create timed once the previous task settled (polled back to
            # back, untimed): its run (the upstream call and the commit settling it) does
            # not share the 2 cores with this create, as no earlier call does with a `greet`.
            "task_create_settled": lambda: _create(http, mcp_a),
            "rest_create": lambda: _rest_create(http, a),
            "get_creator": lambda: _get(http, mcp_a, polled),
            "get_other": lambda: _get(http, mcp_b, polled),
            # One single-row INSERT committed (WAL flushed) from the bench: the floor of
            # any durable create on this database.
            "pg_commit": lambda: pg.execute("INSERT INTO bench_commit VALUES (1)"),
        }
        for index in range(rounds):
            order = list(sides) if index % 2 == 0 else list(reversed(sides))
            medians = {}
            for name in order:
                after = settle if name == "task_create_settled" else None
                medians[name] = statistics.median(await _times(n, sides[name], after))
            say(f"  round {index + 1}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in medians.items()))
            per_round.append(medians)
    await pg.close()
    return {"calls_per_side": n, "rounds": per_round}


async def _throughput(a: str, b: str, tasks: int) -> Results:
    """`tasks` tasks created and polled to completion by CONCURRENCY requesters."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(tasks):
        queue.put_nowait(index)
    statuses: dict[str, int] = {}
    polls = 0

    async def requester(number: int) -> None:
        nonlocal polls
        async with httpx.AsyncClient(timeout=60) as http:
            while True:
                try:
                    index = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                creator, poller = (a, b) if (number + index) % 2 == 0 else (b, a)
                task_id = await _create(http, f"{creator}/mcp")
                while True:
                    polls += 1
                    task = await _get(http, f"{poller}/mcp", task_id)
                    if task["status"] not in ("working", "input_required"):
                        break
                    await asyncio.sleep(POLL_SECONDS)
                statuses[task["status"]] = statuses.get(task["status"], 0) + 1

    began = time.perf_counter()
    await asyncio.gather(*(requester(n) for n in range(CONCURRENCY)))
    seconds = time.perf_counter() - began
    return {
        "tasks": tasks,
        "concurrency": CONCURRENCY,
        "poll_seconds": POLL_SECONDS,
        "seconds": seconds,
        "per_second": tasks / seconds,
        "polls": polls,
        "statuses": statuses,
    }


@contextlib.contextmanager
def _replicas(workdir: Path) -> Iterator[tuple[str, str, str]]:
    """The upstream and two task-hosting gateways on a throwaway database: their base URLs
    and the database's URL."""
    with contextlib.ExitStack() as stack:
        up_port = free_port()
        argv = [sys.executable, str(UPSTREAM_SCRIPT), "--port", str(up_port)]
        stack.enter_context(_process("tasks-upstream", argv, up_port, {}, workdir))
        upstream = f"http://127.0.0.1:{up_port}/mcp"
        database_url = stack.enter_context(throwaway_postgres())
        env = {
            "EVENTLOG_DATABASE_URL": database_url,
            "EVENTLOG_MIGRATE_ON_START": "true",
            "EVENTLOG_LOG_LEVEL": "warning",
            "EVENTLOG_ACCESS_LOG": "false",
        }
        bases = []
        for name in ("tasks-gateway-a", "tasks-gateway-b"):
            # One at a time: the first one migrates the database.
            port = free_port()
            argv = [sys.executable, "-m", "app", "gateway", "--upstream", upstream]
            argv += ["--tasks", SPEC, "--port", str(port)]
            stack.enter_context(_process(name, argv, port, env, workdir))
            bases.append(f"http://127.0.0.1:{port}")
        yield bases[0], bases[1], database_url


def suite(plan: Any, workdir: Path) -> Results:
    """The latency rounds (at least 3), then the throughput run (`plan.name` quick: 40 tasks,
    else 200)."""
    quick = getattr(plan, "name", "full") == "quick"
    out: Results = {"spec": SPEC, "create_goal": CREATE_GOAL, "get_goal": GET_GOAL}
    if not postgres_available():
        say("tasks: PostgreSQL is not answering: skipped")
        out["skipped"] = "PostgreSQL is not answering"
        write_markdown(out)
        return out
    rounds = max(int(getattr(plan, "rounds", 6)), 3)
    n = 30 if quick else 100
    tasks = 40 if quick else 200
    say(f"tasks: two gateways on PostgreSQL, {rounds} rounds of {n} calls per side")
    with _replicas(workdir) as (a, b, database_url):
        out.update(asyncio.run(_latency_rounds(a, b, database_url, rounds, n)))
        say(f"tasks: {tasks} tasks by {CONCURRENCY} requesters")
        out["throughput"] = asyncio.run(_throughput(a, b, tasks))
        say(f"  {out['throughput']}")
    write_markdown(out)
    return out


def _spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def summary(out: Results) -> Results:
    """Per figure: the median of the per-round medians, their range, and the ratios."""
    rounds = out["rounds"]
    sides = {name: _spread([r[name] for r in rounds]) for name in rounds[0]}
    create = [r["task_create"] / r["sync_greet"] for r in rounds]
    settled = [r["task_create_settled"] / r["sync_greet"] for r in rounds]
    get = [r["get_other"] / r["get_creator"] for r in rounds]
    rest = [r["rest_create"] / r["sync_greet"] for r in rounds]
    # The create without its durable transaction: what is left for the gateway's own work.
    extra = [r["task_create_settled"] - r["rest_create"] for r in rounds]
    return {
        "sides": sides,
        "create_ratio": _spread(create),
        "settled_ratio": _spread(settled),
        "get_ratio": _spread(get),
        "rest_ratio": _spread(rest),
        "gateway_extra_ms": _spread(extra),
    }


def markdown(out: Results | None) -> str:
    """The tasks tables, as Markdown."""
    if not out or ("rounds" not in out and not out.get("skipped")):
        return "Gateway tasks: not measured in this run."
    if out.get("skipped"):
        return f"Gateway tasks: skipped ({out['skipped']})."
    s = summary(out)
    sides = s["sides"]

    def ms(name: str) -> str:
        median, low, high = sides[name]
        return f"{median:.2f} | {low:.2f} to {high:.2f}"

    def ratio(name: str, goal: float | None) -> str:
        median, low, high = s[name]
        met = "" if goal is None else (" ✓" if median <= goal else " ✗")
        return f"{median:.2f}x ({low:.2f} to {high:.2f}){met}"

    t = out["throughput"]
    extra = s["gateway_extra_ms"]
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(t["statuses"].items()))
    load = out.get("loadavg", [0.0])[0]
    return "\n".join(
        [
            "# The gateway as task host (`make bench`, bench/suites/tasks.py)",
            "",
            f"Two `mcp-eventlog gateway --tasks {SPEC}` replicas on one PostgreSQL database "
            "in front of the conformance fixtures' upstream (official Python SDK, no task "
            f"support). {len(out['rounds'])} interleaved rounds of {out['calls_per_side']} "
            "sequential requests per side on one connection; the figures are the medians of "
            "the rounds' medians, the ranges those of the rounds, each ratio taken within a "
            "round. Taken on a shared 2-core machine "
            f"(load average {load:.1f}).",
            "",
            "| request | median ms | range ms |",
            "| --- | ---: | ---: |",
            f"| `greet` called synchronously through A (extension not declared) "
            f"| {ms('sync_greet')} |",
            "| `greet` created as a task through A (`CreateTaskResult`), each create timed once "
            f"the previous task settled | {ms('task_create_settled')} |",
            "| the same, back to back (the previous task's run shares the cores with the "
            f"create) | {ms('task_create')} |",
            f"| bare REST `POST /v1/tasks` on A (the durable create alone) | {ms('rest_create')} |",
            f"| a bare PostgreSQL commit (one-row `INSERT`, asyncpg) | {ms('pg_commit')} |",
            f"| `tasks/get` on A, which created the task | {ms('get_creator')} |",
            f"| `tasks/get` on B, which did not | {ms('get_other')} |",
            "",
            "| figure | goal | measured |",
            "| --- | --- | ---: |",
            f"| task creation / synchronous `greet` | ≤ {CREATE_GOAL}x "
            f"| {ratio('settled_ratio', CREATE_GOAL)} |",
            "| the same, creates back to back / synchronous `greet` (a create plus its "
            f"predecessor's whole run against one call) | | {ratio('create_ratio', None)} |",
            f"| `tasks/get` on B / on A | ≤ {GET_GOAL}x | {ratio('get_ratio', GET_GOAL)} |",
            f"| REST `POST /v1/tasks` / synchronous `greet` | (explains the first) "
            f"| {ratio('rest_ratio', None)} |",
            "| task creation minus REST `POST /v1/tasks`, ms (the gateway's own share) | "
            f"| {extra[0]:.2f} ({extra[1]:.2f} to {extra[2]:.2f}) |",
            f"| {t['tasks']} tasks created and polled to completion by {t['concurrency']} "
            f"requesters over both replicas (poll every {t['poll_seconds'] * 1000:g} ms) "
            f"| rate reported | {t['seconds']:.2f} s, **{t['per_second']:.1f} tasks/s** "
            f"({t['polls']} polls; {statuses}) |",
            "",
        ]
    )


def write_markdown(out: Results) -> None:
    """bench/results/tasks.md: this run's tables."""
    alone.write_markdown(RESULTS_MD, markdown, out)


def main() -> None:
    """`python -m bench.suites.tasks [--quick]`: this suite alone."""
    out = alone.run(suite, "eventlog-bench-tasks-", alone.plan(rounds=(3, 6)))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
