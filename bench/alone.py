"""One suite run by itself (`python -m bench.suites.<suite> [--quick]`), outside `make bench`.

Every suite's `main` does the same three things: pick the quick or the full plan, run the
suite in a throwaway work directory, and (for the suites with a results page of their own)
write that page with the machine's load beside it. They do them here.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.plan import FULL, QUICK, Plan

Results = dict[str, Any]


def plan(quick: bool | None = None, *, rounds: tuple[int, int] | None = None) -> Plan:
    """The quick plan with `--quick` on the command line (or `quick`), else the full one;
    `rounds` (quick, full) where the suite runs its own number of rounds."""
    if quick is None:
        quick = "--quick" in sys.argv
    chosen = QUICK if quick else FULL
    if rounds is not None:
        chosen = replace(chosen, rounds=rounds[0] if quick else rounds[1])
    return chosen


def run(suite: Callable[..., Results], prefix: str, the_plan: Plan, **options: Any) -> Results:
    """`suite(the_plan, workdir, **options)` in a temporary directory named `prefix…`."""
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        return suite(the_plan, Path(workdir), **options)


def write_markdown(path: Path, markdown: Callable[[Results], str], out: Results) -> None:
    """`path`: this run's `markdown(out)`, with the load average it was taken under."""
    out["loadavg"] = os.getloadavg()
    path.write_text(markdown(out))
