"""`python -m bench.probes.traced_serve --port P`: the real `serve`, with every SQLite
statement traced.

Before the service imports anything, `sqlite3.connect` is wrapped so that each new
connection (aiosqlite's and the stdlib engine's alike) gets a trace
callback that appends the statement SQLite actually runs (BEGIN and COMMIT included) as
one line to the file named by `BENCH_SQL_TRACE`, with the name of the thread that ran it.
Used by `bench/probes/roundtrips.py` to count the statements of one append; never by the timed
runs (tracing costs time).
"""

from __future__ import annotations

import os
import sqlite3
import sqlite3.dbapi2
import sys
import threading
from typing import Any


def _install(path: str) -> None:
    out = open(path, "a", buffering=1)  # noqa: SIM115 (open for the process's life)
    lock = threading.Lock()
    connect = sqlite3.connect

    def trace(sql: str) -> None:
        line = " ".join(sql.split())
        with lock:
            out.write(f"{threading.current_thread().name}\t{line}\n")

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(trace)
        return conn

    # aiosqlite calls `sqlite3.connect`, SQLAlchemy's pysqlite `sqlite3.dbapi2.connect`.
    sqlite3.connect = traced_connect  # type: ignore[assignment]
    sqlite3.dbapi2.connect = traced_connect  # type: ignore[assignment]


def main() -> int:
    """Trace, then hand over to `mcp-eventlog serve` with the given arguments."""
    _install(os.environ["BENCH_SQL_TRACE"])
    from app.cli import main as serve

    return serve(["serve", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
