"""`python -m bench [--quick]`: run, print the table, write JSON and a plot."""

from __future__ import annotations

import argparse
import signal
import sys

from bench.plan import FULL, QUICK
from bench.report import write_report
from bench.run import run


def main() -> int:
    """Run the full plan (or the quick one) and report it."""
    parser = argparse.ArgumentParser(prog="bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: CI's smoke run")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    # SIGTERM (CI's timeout, a killed make) unwinds like Ctrl-C: every server process,
    # throwaway database and Redis key is cleaned up by the context that made it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = run(plan)
    print(write_report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
