"""A ratio against its ceiling, from interleaved rounds (each round runs every side once).

Shared by the suites whose tables set one side against another (`append_cost`,
`channel_cost`, the TypeScript suites): the median of the per-round ratios with its range,
and the row that states it against its goal.
"""

from __future__ import annotations

import statistics
from typing import Any

Results = dict[str, Any]
Rounds = list[dict[str, Results]]


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max."""
    return {"median": float(statistics.median(values)), "min": min(values), "max": max(values)}


def sides(rounds: Rounds, key: str) -> dict[str, Any]:
    """The per-round results of one side, and the medians of its figures."""
    runs = [r[key] for r in rounds if key in r]
    out: dict[str, Any] = {"rounds": runs}
    for figure in ("requests_per_s", "events_per_s", "p50_ms", "p99_ms"):
        values = [run[figure] for run in runs if figure in run]
        if values:
            out[figure] = float(statistics.median(values))
    out["errors"] = sum(int(run.get("errors", 0)) for run in runs)
    return out


def compare(
    rounds: Rounds, ceiling: str, ours: str, figure: str
) -> tuple[dict[str, Any], dict[str, Any], list[float]]:
    """The ceiling's side, ours, and the per-round ratios of `figure` (ours ÷ ceiling)."""
    ratios = [r[ours][figure] / r[ceiling][figure] for r in rounds]
    return sides(rounds, ceiling), sides(rounds, ours), ratios


def summed_floor(rounds: Rounds, ours: str, floor: list[float]) -> tuple[Any, Any, list[float]]:
    """A ceiling that is a sum of sides (`floor`, one p50 a round): it, ours, the p50 ratios."""
    ceiling = {"p50_ms": float(statistics.median(floor)), "per_round": floor}
    ratios = [r[ours]["p50_ms"] / f for r, f in zip(rounds, floor, strict=True)]
    return ceiling, sides(rounds, ours), ratios


def row(
    figure: str,
    label: str,
    ceiling: Any,
    ours: Any,
    ratios: list[float],
    goal: str,
    **extra: Any,
) -> Results:
    """A table row: figure, ceiling, ours, ratio (median and range), goal (`≥ 0.5x`,
    `≤ 1.5x`), met; `extra` fields (a unit) beside them."""
    ratio = spread(ratios)
    bound = float(goal[2:-1])
    met = ratio["median"] >= bound if goal.startswith("≥") else ratio["median"] <= bound
    return {"figure": figure, "ceiling_label": label, "ceiling": ceiling, "ours": ours} | {
        **extra,
        "ratio": ratio,
        "goal": goal,
        "met": met,
    }
