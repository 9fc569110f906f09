"""One-question tools run by hand (`python -m bench.probes.<name>`), never by `make bench`:
where an append's time goes, its statements and round trips, variants side by side."""
