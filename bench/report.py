"""The tables, the JSON and the plot, all derived from one run's raw results.

Two tables: the per-message cost (an append against its ceilings, from
`bench/suites/append_cost.py`), then the rest (resume and replay by stored history, the peers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.suites import bus, channel_cost, failover, gateway, live, mcp_overhead, tasks, ts_channel

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the second table."""

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


# --- the per-message cost table ---------------------------------------------------------------


def _ratio(row: dict[str, Any]) -> str:
    if "added_ms" in row:
        a = row["added_ms"]
        return f"+{a['median']:.2f} ms (rounds {a['min']:+.2f}..{a['max']:+.2f})"
    r = row["ratio"]
    return f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})"


def _figure(row: dict[str, Any], doc: dict[str, Any]) -> str:
    unit = row["unit"]
    if unit == "ms":
        return f"{doc['p50_ms']:.2f} ms"
    key = "events_per_s" if unit == "events/s" else "requests_per_s"
    text = f"{_n(doc[key])} {unit}"
    if "p99_ms" in doc and doc.get("rounds") and doc["rounds"][0].get("load") is not None:
        text += f" (p99 {doc['p99_ms']:.0f} ms)"
    return text


def cost_table(cost: dict[str, Any]) -> str:
    """The per-message cost table as Markdown: figure, ceiling, ours, ratio, goal."""
    lines = [
        "| figure | ceiling (same run) | mcp-eventlog | ratio (median, per-round range) | goal | |",
        "|---|---|---|---|---|---|",
    ]
    for row in cost["rows"]:
        ceiling = row["ceiling"]
        if "added_ms" in row:
            ours = (
                f"{row['ours']['p50_ms']:.2f} ms (bare `EventLogClient.append` "
                f"{row['ours']['client_append_p50_ms']:.2f} ms)"
            )
        else:
            ours = _figure(row, row["ours"])
        if "per_round" in ceiling:  # no-op + raw transaction
            noop = _median([r["noop"]["p50_ms"] for r in cost["latency"]])
            raw = _median([r["pgbench"]["p50_ms"] for r in cost["latency"]])
            ceiling_text = f"{noop:.2f} + {raw:.2f} = {ceiling['p50_ms']:.2f} ms"
        else:
            ceiling_text = _figure(row, ceiling)
        lines.append(
            f"| {row['figure']} | {row['ceiling_label']}: {ceiling_text} | {ours} "
            f"| {_ratio(row)} | {row['goal']} | {_met(row['met'])} |"
        )
    return "\n".join(lines)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def cost_notes(cost: dict[str, Any]) -> str:
    """What the table rests on: the load tool, the disk's fsync rate, the HTTP clients."""
    lines = []
    if cost["load"] == "wrk":
        lines.append(
            "Load: wrk, one thread per connection, each connection appending to its own "
            "generation; the PostgreSQL ceiling by pgbench with the append's statements."
        )
    else:
        lines.append(
            f"**Load: the Python load process (bench/loads/load.py), not wrk: "
            f"{cost['load_fallback_reason']}.** Its ceilings are lower than wrk's; "
            "`make bench-tools` installs wrk."
        )
    raw1 = [r["raw_sqlite_1"]["commits_per_s"] for r in cost["throughput"]]
    lines.append(
        f"Disk: raw SQLite, one event per FULL commit, {_n(_median(raw1))} commits/s "
        f"(rounds {_n(min(raw1))}-{_n(max(raw1))}): the fsync rate the SQLite rows stand on."
    )
    clients = cost["http_clients"]
    lines.append("")
    lines.append(
        "HTTP clients, one request at a time to the no-op endpoint (same body; stdlib "
        f"asyncio loop), p50 per request; the load tool's ({cost['load']}) p50 on the same "
        "endpoint for reference:"
    )
    lines.append("")
    lines.append("| client | p50 | per-block p50 range | p99 |")
    lines.append("|---|---|---|---|")
    for name, doc in clients.items():
        blocks = doc["p50_ms_per_block"]
        lines.append(
            f"| {name} | {doc['p50_ms']:.3f} ms | {min(blocks):.3f}-{max(blocks):.3f} ms "
            f"| {doc['p99_ms']:.3f} ms |"
        )
    noop = [r["noop"]["p50_ms"] for r in cost["latency"]]
    lines.append(
        f"| ({cost['load']}, 1 connection) | {_median(noop):.3f} ms "
        f"| {min(noop):.3f}-{max(noop):.3f} ms | |"
    )
    return "\n".join(lines)


# --- the rest -----------------------------------------------------------------------


def targets(results: dict[str, Any]) -> dict[str, Any]:
    """Every goal of the run: the per-message cost rows, then resume and replay."""
    out: dict[str, Any] = {}
    for row in results["append_cost"]["rows"]:
        value = row["added_ms"]["median"] if "added_ms" in row else row["ratio"]["median"]
        out[row["figure"]] = {"value": value, "goal": row["goal"], "met": row["met"]}
    sq = results["sqlite"]
    sizes = list(sq["resume"])
    small, large = sizes[0], sizes[-1]
    flat = sq["resume"][large]["p99_ms"] / sq["resume"][small]["p99_ms"]
    sdk = results["peers"]["sdk"][large]["one_stream"]
    out["resume_p99_large_vs_small"] = {"value": flat, "goal": "<= 1.5x", "met": flat <= 1.5}
    growth = sq["replay"]["rss_growth_mib"]
    out["replay_rss_growth_mib"] = {"value": growth, "goal": "< 64 MiB", "met": growth < 64}
    out["resume_vs_sdk_at_largest_p50"] = {
        "value": sq["resume"][large]["p50_ms"] / sdk["p50_ms"],
        "goal": "< 1x",
        "met": sq["resume"][large]["p50_ms"] < sdk["p50_ms"],
    }
    out.update(live.targets(results.get("live")))
    return out


def _service_rates(cost: dict[str, Any]) -> tuple[float, float]:
    """The service's single-event (16 connections) and batched rates on SQLite, events/s."""
    single = _median([r["sqlite"]["events_per_s"] for r in cost["throughput"]])
    batch = _median([r["sqlite"]["events_per_s"] for r in cost["batch"]])
    return single, batch


def rows(results: dict[str, Any]) -> list[Row]:
    """The second table: resume, replay, PostgreSQL resume, the peers."""
    sq, pg, peer = results["sqlite"], results["postgresql"], results["peers"]
    goal = targets(results)
    out = []
    sizes = list(sq["resume"])
    for size in sizes:
        sdk = peer["sdk"][size]
        out.append(
            Row(
                f"resume p50/p99, {_size(size)} stored, SQLite",
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
            f"replay {_size(rp['events'])}-event tail, {rp['pages']} pages, SQLite",
            f"{rp['seconds']:.2f} s ({_n(rp['events_per_s'])} events/s)",
            f"server RSS {rp['rss_baseline_mib']:.0f} → peak {rp['rss_peak_mib']:.0f} MiB",
            f"+{rp['rss_growth_mib']:.1f} MiB",
            "< 64 MiB",
            _met(goal["replay_rss_growth_mib"]["met"]),
        )
    )
    if pg is not None:
        out += _postgres_rows(pg, sq)
    out += _peer_rows(peer, sq, results["append_cost"])
    return out


def _postgres_rows(pg: dict[str, Any], sq: dict[str, Any]) -> list[Row]:
    out = []
    sizes = list(pg["resume"])
    for size in sizes:
        out.append(
            Row(
                f"resume p50/p99, {_size(size)} stored, PostgreSQL",
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


def _peer_rows(peer: dict[str, Any], sq: dict[str, Any], cost: dict[str, Any]) -> list[Row]:
    out = []
    largest = list(peer["sdk"])[-1]
    sdk = peer["sdk"][largest]["one_stream"]
    out.append(
        Row(
            f"SDK InMemoryEventStore, store {_size(largest)} (in-process)",
            f"{_n(sdk['store_events_per_s'])} events/s",
            "not durable; drops events past max_events_per_stream",
        )
    )
    redis = peer.get("redis")
    if redis is None:
        return out
    svc_single, svc_batch = _service_rates(cost)
    out += [
        Row(
            "Redis XADD, 1 per round trip, 16 clients",
            f"{_n(redis['xadd']['events_per_s'])} events/s",
            f"service on SQLite, 16 connections: {_n(svc_single)} events/s",
            f"{svc_single / redis['xadd']['events_per_s']:.2f}x (service/Redis)",
        ),
        Row(
            "Redis XADD pipelined 100, 4 clients",
            f"{_n(redis['xadd_pipelined']['events_per_s'])} events/s",
            f"service on SQLite, 100-event batches: {_n(svc_batch)} events/s",
            f"{svc_batch / redis['xadd_pipelined']['events_per_s']:.2f}x (service/Redis)",
        ),
    ]
    for size, doc in redis["xrange"].items():
        out.append(
            Row(
                f"Redis XRANGE after id p50/p99, {_size(size)} stored",
                _ms(doc),
                f"service resume on SQLite {_ms(sq['resume'][size])}",
                f"{sq['resume'][size]['p50_ms'] / doc['p50_ms']:.1f}x (service/Redis, p50)",
            )
        )
    return out


def table(results: dict[str, Any]) -> str:
    """Both tables as Markdown (what the run prints and docs show)."""
    cost = results["append_cost"]
    lines = ["### The per-message cost", "", cost_table(cost), "", cost_notes(cost)]
    lines += ["", "### Resume, replay and peers", ""]
    head = "| measurement | result | compared with (same run) | ratio | target | |"
    lines += [head, "|---|---|---|---|---|---|"]
    lines += [
        f"| {r.what} | {r.result} | {r.compared_with} | {r.ratio} | {r.target} | {r.met} |"
        for r in rows(results)
    ]
    if results.get("channel_cost"):
        lines += ["", "### The append channel and the PostgreSQL append", ""]
        lines += [channel_cost.table(results["channel_cost"])]
    if results.get("ts_channel"):
        lines += ["", ts_channel.table(results["ts_channel"])]
    lines += ["", live.table(results.get("live"))]
    lines += ["", bus.table(results.get("bus"))]
    # The suites with a results page of their own: that page, its title a level down.
    for key, markdown in (
        ("gateway", gateway.markdown),
        ("sdk_stores", mcp_overhead.sdk_markdown),
        ("failover", failover.markdown),
        ("tasks", tasks.markdown),
    ):
        if results.get(key):
            text = markdown(results[key])
            lines += ["", "##" + text if text.startswith("# ") else text]
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
    """Two panels: append rates against their ceilings, and resume latency as history grows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sq, pg, peer, cost = (
        results["sqlite"],
        results["postgresql"],
        results["peers"],
        results["append_cost"],
    )
    thr, bat = cost["throughput"], cost["batch"]

    def med(runs: list[dict[str, Any]], side: str, key: str = "events_per_s") -> float:
        return _median([r[side][key] for r in runs])

    bars: list[tuple[str, float, str]] = [
        ("no-op HTTP\n1/req", med(thr, "noop"), "grey"),
        ("service SQLite\n1/req", med(thr, "sqlite"), "tab:blue"),
        ("raw SQLite\n1/commit", med(thr, "raw_sqlite_1"), "grey"),
    ]
    if cost["postgresql"]:
        bars += [
            ("service PG\n1/req", med(thr, "postgresql"), "tab:green"),
            ("pgbench raw\n1/txn", med(thr, "pgbench"), "grey"),
        ]
    bars += [
        ("service SQLite\n100/req", med(bat, "sqlite"), "tab:blue"),
        ("raw SQLite\n100/commit", med(bat, "raw_sqlite"), "grey"),
    ]
    if peer.get("redis"):
        bars += [
            ("Redis XADD\n1/req", peer["redis"]["xadd"]["events_per_s"], "tab:red"),
            (
                "Redis XADD\npipelined 100",
                peer["redis"]["xadd_pipelined"]["events_per_s"],
                "tab:red",
            ),
        ]
    fig, (rates_ax, resume_ax) = plt.subplots(1, 2, figsize=(16, 6), width_ratios=[1, 1.1])
    labels = [b[0].replace("\n", " ") for b in bars]
    rates_ax.barh(labels, [b[1] for b in bars], color=[b[2] for b in bars])
    rates_ax.invert_yaxis()
    rates_ax.set_xscale("log")
    rates_ax.set_xlabel("events/s (log)")
    rates_ax.set_title(f"Append rate vs ceilings (same run, load: {cost['load']})")
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
    """Write `bench/results/bench-<plan>.{json,png,md}`; return the tables."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    results["targets"] = targets(results)
    stem = RESULTS_DIR / f"bench-{results['plan']}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    text = table(results)
    stem.with_suffix(".md").write_text(text + "\n")
    plot(results, stem.with_suffix(".png"))
    return text + f"\n\nWrote {stem}.json, {stem}.md and {stem}.png\n"
