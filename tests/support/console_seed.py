"""A realistic set of streams, written through the real writer API of a running service.

Used by the console's browser tests and by `make screenshots`: superseded chains (failover,
retry), evictions past `max_events`, a terminal generation, one expired by its TTL, one
purged by an operator, an empty one, two tenants (one stream id in both), and resume
decisions of every verdict.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

ACME = "writer-key-acme-0123456789"
GLOBEX = "writer-key-globex-0123456789"
ADMIN = "admin-key-operators-0123456789"
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'

KEYS = [
    {"scope": "writer", "tenant": "acme", "key": ACME},
    {"scope": "writer", "tenant": "globex", "key": GLOBEX},
    {"scope": "admin", "tenant": "ops", "key": ADMIN},
]


def server_env(database_url: str) -> dict[str, str]:
    """The service's environment: keys configured, retention every half second."""
    return {
        "EVENTLOG_DATABASE_URL": database_url,
        "EVENTLOG_KEYS": json.dumps(KEYS),
        "EVENTLOG_RETENTION_INTERVAL_SECONDS": "0.5",
        "EVENTLOG_LOG_LEVEL": "warning",
    }


@dataclass
class Seeded:
    """What was written: stream ids and tokens the tests and screenshots look for."""

    tokens: dict[str, list[str]] = field(default_factory=dict)

    def chain(self, stream_id: str) -> list[str]:
        """The stream's tokens in epoch order."""
        return self.tokens[stream_id]


class Writer:
    """The writer API as one tenant."""

    def __init__(self, base_url: str, key: str) -> None:
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30.0
        )

    def open(self, stream_id: str, **options: Any) -> str:
        """Open a generation; its token."""
        answer = self.http.post(f"/v1/streams/{stream_id}/generations", json=options or None)
        answer.raise_for_status()
        token: str = answer.json()["generation"]
        return token

    def append(
        self, token: str, events: list[tuple[str | None, str]], *, terminal: bool = False
    ) -> httpx.Response:
        """Append events (type, data) in batches of 200; the last batch's answer."""
        answer: httpx.Response | None = None
        batches = [events[i : i + 200] for i in range(0, len(events), 200)] or [[]]
        for number, batch in enumerate(batches, 1):
            body = {
                "events": [{"event": kind, "data": data} for kind, data in batch],
                "terminal": terminal and number == len(batches),
            }
            answer = self.http.post(f"/v1/generations/{token}/events", json=body)
        assert answer is not None
        return answer

    def resume(self, stream_id: str | None, last_event_id: str) -> dict[str, Any]:
        """A resume decision (recorded in the audit log)."""
        path = f"/v1/streams/{stream_id}/resume" if stream_id else "/v1/resume"
        answer = self.http.post(path, json={"last_event_id": last_event_id, "limit": 1})
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()


def progress(n: int, request: str = "build_report") -> list[tuple[str | None, str]]:
    """MCP progress notifications, then the JSON-RPC result, as an MCP server stores them."""
    events: list[tuple[str | None, str]] = []
    for i in range(1, n + 1):
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": request, "progress": i, "total": n},
        }
        events.append(("message", json.dumps(note, separators=(",", ":"))))
    return events


def seed(base_url: str) -> Seeded:
    """Write the whole set; returns once the TTL expiry and the purge are visible."""
    acme, globex = Writer(base_url, ACME), Writer(base_url, GLOBEX)
    admin = httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30.0
    )
    out = Seeded()
    try:
        _chains(acme, globex, out)
        _others(acme, globex, out)
        _fillers(acme, globex)
        _decisions(acme, globex, out)
        purged = admin.delete("/admin/v1/streams/mcp.8d03e1.req-3", params={"tenant": "globex"})
        purged.raise_for_status()
        _wait_expired(admin, "mcp.8d03e1.req-2", "acme")
    finally:
        acme.close()
        globex.close()
        admin.close()
    return out


def _chains(acme: Writer, globex: Writer, out: Seeded) -> None:
    sid = "mcp.4f9a2c.req-17"
    first = acme.open(sid, producer="worker-a (pid 4121)")
    acme.append(first, progress(120))
    second = acme.open(sid, reason="failover", producer="worker-b (pid 877)", max_events=200)
    acme.append(second, progress(340))
    third = acme.open(sid, reason="retry", producer="worker-b (pid 877)")
    acme.append(third, progress(45))
    # The stale worker-a still writes to its generation: fenced (409 superseded).
    fenced = acme.append(first, progress(1))
    assert fenced.status_code == 409, fenced.text
    out.tokens[sid] = [first, second, third]

    sid = "tools.report-builder.run-0042"
    tokens = []
    for epoch, (n, producer) in enumerate([(12, "runner-1"), (30, "runner-2"), (8, "runner-2")]):
        reason = "initial" if epoch == 0 else "reset"
        tokens.append(globex.open(sid, reason=reason, producer=producer))
        globex.append(tokens[-1], progress(n, "report"))
    tokens.append(globex.open(sid, reason="retry", producer="runner-3"))
    globex.append(tokens[-1], progress(64, "report"), terminal=True)
    out.tokens[sid] = tokens


def _others(acme: Writer, globex: Writer, out: Seeded) -> None:
    sid = "mcp.4f9a2c.req-18"
    done = acme.open(sid, producer="worker-a (pid 4121)")
    acme.append(done, progress(58), terminal=True)
    out.tokens[sid] = [done]

    sid = "mcp.8d03e1.req-2"  # expires by its TTL (retention runs every 0.5 s)
    lapsed = acme.open(sid, producer="worker-c", ttl_seconds=1)
    acme.append(lapsed, progress(30))
    out.tokens[sid] = [lapsed]

    sid = "mcp.8d03e1.req-3"  # purged by an operator below
    old = globex.open(sid, producer="worker-d")
    globex.append(old, progress(20))
    new = globex.open(sid, reason="failover", producer="worker-e")
    globex.append(new, progress(25))
    out.tokens[sid] = [old, new]

    sid = "mcp.b71e55.req-9"  # a long stream with a small window: most of it evicted
    busy = globex.open(sid, producer="ingest-7", max_events=60)
    globex.append(busy, progress(400, "ingest"))
    out.tokens[sid] = [busy]

    sid = "mcp.c0ffee.req-1"  # opened, nothing written yet
    out.tokens[sid] = [acme.open(sid, producer="worker-a (pid 4121)")]

    sid = "debug.hostile-payload"  # data, type and producer that must stay text
    hostile = acme.open(sid, producer=HOSTILE)
    acme.append(hostile, [(HOSTILE, HOSTILE), ("message", "plain text after it")])
    out.tokens[sid] = [hostile]

    for writer, n in ((acme, 5), (globex, 9)):  # one stream id, two tenants
        token = writer.open("shared.session-1", producer="gateway")
        writer.append(token, progress(n))


def _fillers(acme: Writer, globex: Writer) -> None:
    for i in range(24):
        writer = acme if i % 3 else globex
        sid = f"mcp.{0x5A1000 + i * 97:06x}.req-{i % 5 + 1}"
        token = writer.open(sid, producer=f"worker-{i % 4}")
        writer.append(token, progress(3 + (i * 7) % 40), terminal=i % 4 == 0)


def _decisions(acme: Writer, globex: Writer, out: Seeded) -> None:
    first, second, third = out.chain("mcp.4f9a2c.req-17")
    sid = "mcp.4f9a2c.req-17"
    for seq in (40, 41, 44, 45):
        acme.resume(sid, f"{third}:{seq}")  # resume ok
    for seq in (118, 119, 120):
        acme.resume(sid, f"{first}:{seq}")  # reset superseded
    acme.resume(sid, f"{second}:20")  # reset superseded (also evicted, row 5 decides)
    acme.resume(sid, f"{third}:99")  # invalid beyond_tail
    acme.resume(sid, "47")  # invalid malformed_id (the seed's bare integer)
    acme.resume(sid, HOSTILE)  # invalid malformed_id, and markup in the audit log
    acme.resume(sid, "AAAAAAAAAAAAAAAAAAAAAA:3")  # invalid unknown_generation
    acme.resume("mcp.4f9a2c.req-18", f"{third}:3")  # invalid cross_stream
    acme.resume("mcp.4f9a2c.req-18", f"{out.chain('mcp.4f9a2c.req-18')[0]}:50")  # reset terminal
    busy = out.chain("mcp.b71e55.req-9")[0]
    globex.resume("mcp.b71e55.req-9", f"{busy}:12")  # reset evicted
    globex.resume("mcp.b71e55.req-9", f"{busy}:399")  # resume ok
    globex.resume(None, f"{busy}:400")  # resume ok, nothing missed


def _wait_expired(admin: httpx.Client, stream_id: str, tenant: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        detail = admin.get(f"/admin/v1/streams/{stream_id}", params={"tenant": tenant})
        detail.raise_for_status()
        if all(g["expired"] for g in detail.json()["generations"]):
            return
        time.sleep(0.2)  # the retention worker runs in another process: poll its result
    raise TimeoutError(f"{stream_id} did not expire within {timeout}s")
