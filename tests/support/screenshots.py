"""`make screenshots`: a PNG of each console view, in docs/images/console-*.png.

A service process on a fresh SQLite file is seeded through its writer API (tests/support/
seed.py). The live API records decisions at the time they are made, so to give the chart
of verdicts over time a realistic shape, two hours of earlier decisions are written into
the audit log first, through the storage layer, with their own timestamps (a failover
around the middle causes a burst of `superseded` resets; a client bug later sends
`beyond_tail` claims). Everything else on the pictures is what the service itself stored.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from app.settings import Settings
from app.storage import decisions
from app.storage.database import Database
from app.storage.migrate import upgrade
from app.storage.records import DecisionEntry
from tests.support.browser import chromium, missing
from tests.support.console_seed import ADMIN, Seeded, seed, server_env
from tests.support.processes import REPO, running_server

if TYPE_CHECKING:
    from playwright.sync_api import Page

IMAGES = REPO / "docs" / "images"
VIEWPORT = {"width": 1440, "height": 900}


def history(now: datetime, rng: random.Random) -> list[DecisionEntry]:
    """Two hours of decisions, oldest first, ending five minutes ago."""
    entries: list[DecisionEntry] = []
    start = now - timedelta(hours=2)
    for minute in range(115):
        at = start + timedelta(minutes=minute)
        counts = {"ok": rng.randint(6, 14), "superseded": rng.randint(0, 1)}
        if 48 <= minute < 56:  # a worker fails over: its clients are told to start over
            counts["superseded"] += rng.randint(10, 22)
            counts["evicted"] = rng.randint(0, 3)
        if 84 <= minute < 90:  # a client releases a build that claims ids it never got
            counts["beyond_tail"] = rng.randint(4, 9)
        if rng.random() < 0.15:
            counts["terminal"] = 1
        if rng.random() < 0.05:
            counts["unknown_generation"] = 1
        for reason, count in counts.items():
            verdict = {"ok": "resume", "beyond_tail": "invalid", "unknown_generation": "invalid"}
            for _ in range(count):
                entries.append(
                    DecisionEntry(
                        decided_at=at + timedelta(seconds=rng.uniform(0, 59)),
                        tenant=rng.choice(["acme", "acme", "globex"]),
                        stream_id=f"mcp.{rng.randrange(16**6):06x}.req-{rng.randint(1, 40)}",
                        last_event_id=f"{rng.randbytes(16).hex()[:22]}:{rng.randint(1, 300)}",
                        verdict=verdict.get(reason, "reset"),
                        reason=reason,
                        generation=None,
                        events=0,
                    )
                )
    entries.sort(key=lambda e: e.decided_at)
    return entries


async def write_history(database_url: str) -> int:
    """Write the earlier decisions into the audit log of a migrated database."""
    database = Database(Settings(database_url=database_url))
    try:
        entries = history(datetime.now(UTC), random.Random(14))
        await database.write(lambda conn: decisions.record(conn, entries), weight=len(entries))
        return len(entries)
    finally:
        await database.close()


def shoot(page: Page, name: str, *, full_page: bool = True) -> None:
    """Save the page as docs/images/console-<name>.png."""
    path = IMAGES / f"console-{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    print(f"  {path.relative_to(REPO)}")


def shoot_top(page: Page, name: str, height: int = 1300) -> None:
    """Save the top of a long page (its first rows show what the rest looks like)."""
    page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
    shoot(page, name, full_page=False)
    page.set_viewport_size(VIEWPORT)


def views(page: Page, base: str, seeded: Seeded) -> None:
    """Visit each view, wait for its content, and save it."""
    page.goto(f"{base}/admin/ui/")
    page.wait_for_selector("#login")
    page.fill("#admin-key", "a-key-that-was-rotated-away")
    page.click("#login button[type=submit]")
    page.wait_for_selector("#login-status [role=alert]")
    shoot(page, "login", full_page=False)
    page.fill("#admin-key", ADMIN)
    page.click("#login button[type=submit]")
    page.wait_for_selector("#view-streams table")
    page.goto(f"{base}/admin/ui/#/streams?limit=25")
    page.wait_for_selector("#next-page")
    shoot(page, "streams")

    chain = "mcp.4f9a2c.req-17"
    page.goto(f"{base}/admin/ui/#/streams/acme/{chain}")
    page.wait_for_selector("#timeline")
    second = seeded.chain(chain)[1]
    row = page.locator(f'#timeline [data-generation="{second}"] .bar-retained')
    box = row.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
    page.wait_for_selector("#tooltip:not([hidden])")
    shoot(page, "stream")
    page.mouse.move(0, 0)

    page.goto(f"{base}/admin/ui/#/streams/globex/tools.report-builder.run-0042")
    page.wait_for_selector("#timeline")
    shoot(page, "stream-terminal")

    page.goto(f"{base}/admin/ui/#/generations/{second}")
    page.wait_for_selector("#view-generation table")
    shoot_top(page, "generation")

    first = seeded.chain(chain)[0]
    page.goto(f"{base}/admin/ui/#/explain?id={first}:118&stream={chain}")
    page.wait_for_selector("#explain-result")
    shoot(page, "explain")

    page.goto(f"{base}/admin/ui/#/explain?id={seeded.chain(chain)[2]}:40&stream={chain}")
    page.wait_for_selector("#explain-result")
    shoot(page, "explain-resume")

    page.goto(f"{base}/admin/ui/#/decisions?limit=1000")
    page.wait_for_selector("#verdict-chart")
    shoot_top(page, "decisions")

    page.goto(f"{base}/admin/ui/#/stats")
    page.wait_for_selector("#verdict-bars")
    shoot(page, "stats")

    page.goto(f"{base}/admin/ui/#/generations/{seeded.chain(chain)[2]}")
    page.wait_for_selector("#terminate")
    page.click("#terminate")
    page.wait_for_selector("dialog#confirm[open]")
    shoot(page, "confirm", full_page=False)


def main() -> int:
    """Seed a service, visit every view, save the pictures."""
    reason = missing()
    if reason is not None:
        print(f"make screenshots needs Chromium: {reason}", file=sys.stderr)
        return 1
    IMAGES.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'eventlog.db'}"
        upgrade(url)
        print(f"wrote {asyncio.run(write_history(url))} earlier decisions")
        with running_server(server_env(url)) as base:
            seeded = seed(base)
            with chromium() as browser:
                page = browser.new_page(viewport=VIEWPORT)
                views(page, base, seeded)
    print(f"done in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
