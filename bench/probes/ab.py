"""`python -m bench.probes.ab --variant … --variant …`: service variants side by side, interleaved.

For the optimisation work: each variant is the real service started from a source tree
(a checkout or scratch copy holding an `app` package; default this one) with optional
settings, on a database of its own (SQLite file, or `--postgres`: a throwaway
PostgreSQL database each). Every round measures every variant in turn, so they share
the machine's noise: single-event appends from 16 connections (req/s, wrk) and from one
connection (p50). Prints medians, per-round ranges and each variant's per-round ratio to
the first.

    python -m bench.probes.ab --variant label=before \\
        --variant 'label=no-ping,tree=/tmp/scratch' \\
        --variant 'label=pool16,env=EVENTLOG_DB_POOL_SIZE=16;EVENTLOG_DB_MAX_OVERFLOW=0' \\
        --postgres --rounds 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from bench import seed, servers
from bench.loads import wrk
from bench.suites.append_cost import open_generations, say


@dataclass
class Variant:
    """One service to compare."""

    label: str
    tree: Path = servers.REPO
    env: dict[str, str] = field(default_factory=dict)


def parse_variant(text: str) -> Variant:
    """`label=NAME[,tree=PATH][,env=K=V;K=V]`."""
    parts = dict(part.split("=", 1) for part in text.split(","))
    env = dict(kv.split("=", 1) for kv in parts.get("env", "").split(";") if kv)
    return Variant(parts["label"], Path(parts.get("tree", str(servers.REPO))).resolve(), env)


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.2f} ({min(values):,.2f}-{max(values):,.2f})"


def compare(variants: list[Variant], *, postgres: bool, rounds: int, seconds: int) -> str:
    """Interleaved rounds of every variant; the report."""
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="eventlog-ab-")))
        running = []
        for index, variant in enumerate(variants):
            if postgres:
                url = stack.enter_context(servers.throwaway_postgres())
            else:
                url = f"sqlite+aiosqlite:///{tmp}/ab-{index}.db"
            seed.migrate(url)
            server = stack.enter_context(
                servers.service(url, tmp, name=f"ab-{index}", tree=variant.tree, env=variant.env)
            )
            many = open_generations(server.port, "ab16", 16)
            one = open_generations(server.port, "ab1", 1)
            wrk.append(server.port, many, batch=1, seconds=1)  # warm up
            running.append((variant, server, many, one))
        errors: dict[str, int] = {v.label: 0 for v in variants}
        rates: dict[str, list[float]] = {v.label: [] for v in variants}
        p50s: dict[str, list[float]] = {v.label: [] for v in variants}
        for index in range(rounds):
            for variant, server, many, one in running:
                loaded = wrk.append(server.port, many, batch=1, seconds=seconds)
                alone = wrk.append(server.port, one, batch=1, seconds=seconds)
                rates[variant.label].append(loaded["requests_per_s"])
                p50s[variant.label].append(alone["p50_ms"])
                errors[variant.label] += loaded["errors"] + alone["errors"]
            say(
                f"round {index + 1}/{rounds}: "
                + ", ".join(
                    f"{v.label} {rates[v.label][-1]:,.0f}/s {p50s[v.label][-1]:.2f} ms"
                    for v in variants
                )
            )
    first = variants[0].label
    lines = [
        f"{'postgresql' if postgres else 'sqlite'}, {rounds} rounds of {seconds} s, "
        f"load {wrk.tool()}: median (per-round range)",
        "| variant | 16 connections, req/s | ratio to first | 1 connection, p50 ms "
        "| ratio to first | errors |",
        "|---|---|---|---|---|---|",
    ]
    for variant in variants:
        label = variant.label
        rate_ratio = [b / a for a, b in zip(rates[first], rates[label], strict=True)]
        p50_ratio = [b / a for a, b in zip(p50s[first], p50s[label], strict=True)]
        lines.append(
            f"| {label} | {_spread(rates[label])} | {_spread(rate_ratio)} "
            f"| {_spread(p50s[label])} | {_spread(p50_ratio)} | {errors[label]} |"
        )
    return "\n".join(lines)


def main() -> int:
    """Parse the variants, compare them, print the table."""
    parser = argparse.ArgumentParser(prog="bench.probes.ab", description=__doc__)
    parser.add_argument("--variant", action="append", required=True, type=parse_variant)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=3)
    args = parser.parse_args()
    print(compare(args.variant, postgres=args.postgres, rounds=args.rounds, seconds=args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
