"""The storage ceiling: the service's rows written straight into SQLite, in-process.

Same schema (alembic head), same pragmas as the service's engine hook (WAL,
synchronous=FULL, foreign keys on), same transaction per batch: insert the batch's event
rows and move the generation's counters, then commit. No HTTP, no asyncio, no
SQLAlchemy: what the database alone allows on this disk.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.loads.payload import EVENT_TYPE, NBYTES, PROGRESS
from bench.seed import seed_long_generation


def raw_sqlite_append(path: str, url: str, *, batch: int, duration: float) -> dict[str, Any]:
    """Commit `batch`-event transactions for `duration` seconds; events/s."""
    token = seed_long_generation(url, "raw-ceiling", 0)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
            conn.execute(f"PRAGMA {pragma}")
        (gen_pk,) = conn.execute("SELECT id FROM generations WHERE token = ?", (token,)).fetchone()
        tail, commits = 0, 0
        end = time.perf_counter() + duration
        began = time.perf_counter()
        while time.perf_counter() < end:
            rows = [
                (gen_pk, seq, EVENT_TYPE, PROGRESS, NBYTES)
                for seq in range(tail + 1, tail + batch + 1)
            ]
            now = datetime.now(UTC)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO events (generation_pk, seq, event, data, nbytes) VALUES (?,?,?,?,?)",
                rows,
            )
            tail += batch
            conn.execute(
                "UPDATE generations SET tail_seq = ?, retained_events = ?, retained_bytes = ?,"
                " last_append_at = ?, expires_at = ? WHERE id = ?",
                (
                    tail,
                    tail,
                    tail * NBYTES,
                    now.isoformat(" "),
                    (now + timedelta(days=30)).isoformat(" "),
                    gen_pk,
                ),
            )
            conn.execute("COMMIT")
            commits += 1
        elapsed = time.perf_counter() - began
    finally:
        conn.close()
    return {
        "commits_per_s": commits / elapsed,
        "events_per_s": tail / elapsed,
        "batch": batch,
    }
