"""The measurements `make bench` runs, one module per section of the report; each also runs
alone as `python -m bench.suites.<name> [--quick]`."""
