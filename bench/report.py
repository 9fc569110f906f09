"""The table, the JSON and the plot, all derived from one run's raw results."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table."""

    what: str
    result: str
    compared_with: str = ""
    ratio: str = ""
    target: str = ""
    met: str = ""


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _ms(doc: dict[str, Any]) -> str:
    return f"{doc['p50_ms']:.2f} / {doc['p99_ms']:.2f} ms"


def _size(n: int | str) -> str:
    n = int(n)
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _noop_rate(sq: dict[str, Any]) -> float:
    return float(sq["noop"]["requests_per_s"])


def _spread(doc: dict[str, Any]) -> str:
    return f"per round {doc['min']:.2f}-{doc['max']:.2f}x"


def targets(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's five targets: value, limit, met."""
    sq = results["sqlite"]
    sizes = list(sq["resume"])
    small, large = sizes[0], sizes[-1]
    single_ratio = sq["single_vs_noop"]["median"]
    batch = sq["append_batch"]["events_per_s"]
    batch_ratio = sq["batch_vs_raw"]["median"]
    flat = sq["resume"][large]["p99_ms"] / sq["resume"][small]["p99_ms"]
    sdk = results["peers"]["sdk"][large]["one_stream"]
    return {
        "single_vs_noop": {"value": single_ratio, "limit": 0.5, "met": single_ratio >= 0.5},
        "batch_events_per_s": {"value": batch, "limit": 30_000, "met": batch >= 30_000},
        "batch_vs_raw": {"value": batch_ratio, "limit": 0.25, "met": batch_ratio >= 0.25},
        "resume_p99_large_vs_small": {"value": flat, "limit": 1.5, "met": flat <= 1.5},
        "replay_rss_growth_mib": {
            "value": sq["replay"]["rss_growth_mib"],
            "limit": 64,
            "met": sq["replay"]["rss_growth_mib"] < 64,
        },
        "resume_vs_sdk_at_largest_p50": {
            "value": sq["resume"][large]["p50_ms"] / sdk["p50_ms"],
            "limit": 1.0,
            "met": sq["resume"][large]["p50_ms"] < sdk["p50_ms"],
        },
    }


def results_batch(results: dict[str, Any]) -> int:
    """The batch size of the run (the raw ceiling is keyed by it)."""
    return int(next(k for k in results["sqlite"] if k.startswith("raw_") and k != "raw_1")[4:])


def rows(results: dict[str, Any]) -> list[Row]:
    """The table: every figure with what it is compared with, side by side."""
    sq, pg, peer = results["sqlite"], results["postgresql"], results["peers"]
    goal = targets(results)
    batch = results_batch(results)
    noop = _noop_rate(sq)
    single = sq["append_single"]
    out = [
        Row(
            "1. append, 1 event/request, 16 clients, SQLite",
            f"{_n(single['requests_per_s'])} req/s (p99 {single['p99_ms']:.0f} ms)",
            f"no-op endpoint {_n(noop)} req/s ({_spread(sq['single_vs_noop'])}; "
            f"the load process used at most {sq['noop'].get('load_cpu_share', 0):.0%} of a core)",
            f"{goal['single_vs_noop']['value']:.2f}x",
            "≥ 0.5x",
            _met(goal["single_vs_noop"]["met"]),
        ),
        Row(
            "   (raw in-process SQLite, 1 event/commit)",
            f"{_n(sq['raw_1']['events_per_s'])} commits/s",
            "the fsync ceiling for one event per transaction",
        ),
        Row(
            f"2. append, {batch} events/request, 4 clients, SQLite",
            f"{_n(sq['append_batch']['events_per_s'])} events/s",
            f"raw in-process SQLite {_n(sq[f'raw_{batch}']['events_per_s'])} events/s "
            f"({_spread(sq['batch_vs_raw'])})",
            f"{goal['batch_vs_raw']['value']:.2f}x",
            "≥ 30,000/s and ≥ 0.25x",
            f"{_met(goal['batch_events_per_s']['met'])} / {_met(goal['batch_vs_raw']['met'])}",
        ),
    ]
    sizes = list(sq["resume"])
    for size in sizes:
        sdk = peer["sdk"][size]
        out.append(
            Row(
                f"3. resume p50/p99, {_size(size)} stored, SQLite",
                _ms(sq["resume"][size]),
                f"SDK in-memory, one stream: {_ms(sdk['one_stream'])}; "
                f"streams of 200: {_ms(sdk['streams_of_200'])}",
                f"{sq['resume'][size]['p50_ms'] / sdk['one_stream']['p50_ms']:.2f}x (p50)",
            )
        )
    out.append(
        Row(
            f"   resume p99 {_size(sizes[-1])} / {_size(sizes[0])}, SQLite",
            f"{goal['resume_p99_large_vs_small']['value']:.2f}x",
            "",
            "",
            "≤ 1.5x",
            _met(goal["resume_p99_large_vs_small"]["met"]),
        )
    )
    out.append(
        Row(
            f"   resume at {_size(sizes[-1])} vs SDK in-memory (one stream)",
            f"{sq['resume'][sizes[-1]]['p50_ms']:.2f} ms",
            f"{peer['sdk'][sizes[-1]]['one_stream']['p50_ms']:.2f} ms",
            f"{goal['resume_vs_sdk_at_largest_p50']['value']:.2f}x (p50)",
            "< 1x (faster)",
            _met(goal["resume_vs_sdk_at_largest_p50"]["met"]),
        )
    )
    rp = sq["replay"]
    out.append(
        Row(
            f"4. replay {_size(rp['events'])}-event tail, {rp['pages']} pages, SQLite",
            f"{rp['seconds']:.2f} s ({_n(rp['events_per_s'])} events/s)",
            f"server RSS {rp['rss_baseline_mib']:.0f} → peak {rp['rss_peak_mib']:.0f} MiB",
            f"+{rp['rss_growth_mib']:.1f} MiB",
            "< 64 MiB",
            _met(goal["replay_rss_growth_mib"]["met"]),
        )
    )
    if pg is not None:
        out += _postgres_rows(pg, sq, noop, batch)
    out += _peer_rows(peer, sq, batch)
    return out


def _postgres_rows(pg: dict[str, Any], sq: dict[str, Any], noop: float, batch: int) -> list[Row]:
    out = []
    for key, label in (("append_single", "1 process"), ("two_append_single", "2 processes")):
        rate = pg[key]["requests_per_s"]
        out.append(
            Row(
                f"5. append, 1 event/request, 16 clients, PostgreSQL, {label}",
                f"{_n(rate)} req/s (p99 {pg[key]['p99_ms']:.0f} ms)",
                f"no-op endpoint {_n(noop)} req/s",
                f"{rate / noop:.2f}x",
            )
        )
    for key, label in (("append_batch", "1 process"), ("two_append_batch", "2 processes")):
        rate = pg[key]["events_per_s"]
        out.append(
            Row(
                f"5. append, {batch} events/request, 4 clients, PostgreSQL, {label}",
                f"{_n(rate)} events/s",
                f"service on SQLite {_n(sq['append_batch']['events_per_s'])} events/s",
                f"{rate / sq['append_batch']['events_per_s']:.2f}x",
            )
        )
    sizes = list(pg["resume"])
    for size in sizes:
        out.append(
            Row(
                f"5. resume p50/p99, {_size(size)} stored, PostgreSQL",
                _ms(pg["resume"][size]),
                f"SQLite {_ms(sq['resume'][size])}",
                f"{pg['resume'][size]['p50_ms'] / sq['resume'][size]['p50_ms']:.2f}x (p50)",
            )
        )
    flat = pg["resume"][sizes[-1]]["p99_ms"] / pg["resume"][sizes[0]]["p99_ms"]
    out.append(
        Row(f"   resume p99 {_size(sizes[-1])} / {_size(sizes[0])}, PostgreSQL", f"{flat:.2f}x")
    )
    return out


def _peer_rows(peer: dict[str, Any], sq: dict[str, Any], batch: int) -> list[Row]:
    out = []
    largest = list(peer["sdk"])[-1]
    sdk = peer["sdk"][largest]["one_stream"]
    out.append(
        Row(
            f"6. SDK InMemoryEventStore, store {_size(largest)} (in-process)",
            f"{_n(sdk['store_events_per_s'])} events/s",
            "not durable; drops events past max_events_per_stream",
        )
    )
    redis = peer.get("redis")
    if redis is None:
        return out
    svc_single = sq["append_single"]["events_per_s"]
    svc_batch = sq["append_batch"]["events_per_s"]
    out += [
        Row(
            "6. Redis XADD, 1 per round trip, 16 clients",
            f"{_n(redis['xadd']['events_per_s'])} events/s",
            f"service on SQLite {_n(svc_single)} events/s",
            f"{svc_single / redis['xadd']['events_per_s']:.2f}x (service/Redis)",
        ),
        Row(
            f"6. Redis XADD pipelined {batch}, 4 clients",
            f"{_n(redis['xadd_pipelined']['events_per_s'])} events/s",
            f"service on SQLite {_n(svc_batch)} events/s",
            f"{svc_batch / redis['xadd_pipelined']['events_per_s']:.2f}x (service/Redis)",
        ),
    ]
    for size, doc in redis["xrange"].items():
        out.append(
            Row(
                f"6. Redis XRANGE after id p50/p99, {_size(size)} stored",
                _ms(doc),
                f"service resume on SQLite {_ms(sq['resume'][size])}",
                f"{sq['resume'][size]['p50_ms'] / doc['p50_ms']:.1f}x (service/Redis, p50)",
            )
        )
    return out


def table(results: dict[str, Any]) -> str:
    """The table as Markdown (what the README shows and the run prints)."""
    head = "| measurement | result | compared with (same run) | ratio | target | |"
    lines = [head, "|---|---|---|---|---|---|"]
    lines += [
        f"| {r.what} | {r.result} | {r.compared_with} | {r.ratio} | {r.target} | {r.met} |"
        for r in rows(results)
    ]
    machine = results["machine"]
    lines.append("")
    lines.append(
        f"Plan `{results['plan']}`, started {results['started_at']}, {machine['cpus']} CPUs, "
        f"load average {machine['loadavg_before'][0]:.2f} before and "
        f"{machine['loadavg_after'][0]:.2f} after; suites took "
        + ", ".join(f"{k} {v:.0f}s" for k, v in results["seconds"].items())
        + "."
    )
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    """Two panels: append rates side by side, and resume latency as history grows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sq, pg, peer = results["sqlite"], results["postgresql"], results["peers"]
    batch = results_batch(results)
    fig, (rates_ax, resume_ax) = plt.subplots(1, 2, figsize=(16, 6), width_ratios=[1, 1.1])
    bars: list[tuple[str, float, str]] = [
        ("no-op HTTP\n1/req", _noop_rate(sq), "grey"),
        ("service SQLite\n1/req", sq["append_single"]["events_per_s"], "tab:blue"),
        (f"service SQLite\n{batch}/req", sq["append_batch"]["events_per_s"], "tab:blue"),
        (f"raw SQLite\n{batch}/commit", sq[f"raw_{batch}"]["events_per_s"], "grey"),
    ]
    if pg is not None:
        bars += [
            ("service PG\n1/req", pg["append_single"]["events_per_s"], "tab:green"),
            ("2x service PG\n1/req", pg["two_append_single"]["events_per_s"], "tab:green"),
            (f"service PG\n{batch}/req", pg["append_batch"]["events_per_s"], "tab:green"),
            (f"2x service PG\n{batch}/req", pg["two_append_batch"]["events_per_s"], "tab:green"),
        ]
    if peer.get("redis"):
        bars += [
            ("Redis XADD\n1/req", peer["redis"]["xadd"]["events_per_s"], "tab:red"),
            (
                f"Redis XADD\npipelined {batch}",
                peer["redis"]["xadd_pipelined"]["events_per_s"],
                "tab:red",
            ),
        ]
    labels = [b[0].replace("\n", " ") for b in bars]
    rates_ax.barh(labels, [b[1] for b in bars], color=[b[2] for b in bars])
    rates_ax.invert_yaxis()
    rates_ax.set_xscale("log")
    rates_ax.set_xlabel("events/s (log)")
    rates_ax.set_title("Append rate (same run, 127.0.0.1)")
    for index, bar in enumerate(bars):
        rates_ax.text(bar[1], index, f" {bar[1]:,.0f}", va="center", fontsize=8)
    sizes = [int(s) for s in sq["resume"]]
    series: list[tuple[str, dict[str, Any], str]] = [("service SQLite", sq["resume"], "tab:blue")]
    if pg is not None:
        series.append(("service PostgreSQL", pg["resume"], "tab:green"))
    series.append(
        (
            "SDK in-memory, one stream",
            {k: v["one_stream"] for k, v in peer["sdk"].items()},
            "tab:orange",
        )
    )
    series.append(
        (
            "SDK in-memory, streams of 200",
            {k: v["streams_of_200"] for k, v in peer["sdk"].items()},
            "tab:brown",
        )
    )
    if peer.get("redis"):
        series.append(("Redis XRANGE", peer["redis"]["xrange"], "tab:red"))
    for label, docs, color in series:
        p50 = [docs[str(s)]["p50_ms"] for s in sizes]
        p99 = [docs[str(s)]["p99_ms"] for s in sizes]
        resume_ax.plot(sizes, p50, "o-", color=color, label=f"{label} p50")
        resume_ax.plot(sizes, p99, "x--", color=color, alpha=0.6, label=f"{label} p99")
    resume_ax.set_xscale("log")
    resume_ax.set_yscale("log")
    resume_ax.set_xlabel("events stored")
    resume_ax.set_ylabel("latency, ms (log)")
    resume_ax.set_title("Resume 5 events before the tail, as history grows")
    resume_ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"mcp-eventlog bench ({results['plan']}, {results['started_at']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(results: dict[str, Any]) -> str:
    """Write `bench/results/bench-<plan>.{json,png}`; return the table."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    results["targets"] = targets(results)
    stem = RESULTS_DIR / f"bench-{results['plan']}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, stem.with_suffix(".png"))
    return table(results) + f"\n\nWrote {stem}.json and {stem}.png\n"
