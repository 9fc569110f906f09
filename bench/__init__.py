"""`make bench`: the service's throughput and latency, side by side with its ceilings and peers.

Run `python -m bench` (the full plan) or `python -m bench --quick` (small sizes, CI's smoke run);
how long each takes is stated once, in docs/performance.md. The modules: `suites/` (one per
section of the report, each also runnable alone), `loads/` (the load processes and what they
send), `baselines/` (what the service is compared against), `probes/` (one-question tools run
by hand); `run.py`, `plan.py`, `report.py`, `servers.py` and `seed.py` drive them all.
"""
