"""`make bench`: the service's throughput and latency, side by side with its ceilings and peers.

Run `python -m bench` (full, under 10 minutes) or `python -m bench --quick` (under a minute).
"""
