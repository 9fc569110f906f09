"""One client call against the hostile fake service, in a process of its own.

`python -m tests.support.hostile_calls URL KEY CALL` makes one `EventLogClient` call
(`append`, `open`, `resume`, `page`, `stream` or `follow`; `channel-append` appends over
the append channel, and the outcome says which appends fell back to REST) with the key
that picks the misbehaviour (`tests.support.hostile_service`) and prints one JSON line:
the error it raised (class, code, the classes it is an instance of), how long it took,
and how much the process's peak RSS grew during the call (`VmHWM`), so the test judges
memory in the client's own process, apart from pytest's.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from mcp_eventlog_client import EventLogClient, NewEvent, RetryPolicy

MiB = 1024 * 1024


def peak_rss() -> int:
    """The process's peak resident set size so far, in bytes: `VmHWM`, which (unlike
    `ru_maxrss`, inherited across fork) belongs to this program's own memory."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


async def call(log: EventLogClient, name: str) -> Any:
    """One call of the writer API."""
    if name in ("append", "channel-append"):
        return await log.append("tok", [NewEvent("hello")], first_seq=1)
    if name == "open":
        return await log.open_generation("s")
    if name == "resume":
        return await log.resume("tok:1")
    if name == "page":
        return await log.page("tok")
    if name == "stream":
        return await log.stream("s")
    if name == "follow":
        return [item async for item in log.follow("s")]
    raise ValueError(name)


async def main(url: str, key: str, name: str) -> None:
    """Run the call, print what happened."""
    transport = "channel" if name.startswith("channel-") else "rest"
    log = EventLogClient(
        url, key=key, timeout=3.0, retry=RetryPolicy(attempts=1), append_transport=transport
    )
    before = peak_rss()
    started = time.monotonic()
    outcome: dict[str, Any] = {"error": None}
    try:
        outcome["result"] = repr(await call(log, name))[:200]
    except Exception as error:  # the point is to see what escapes, whatever it is
        outcome["error"] = type(error).__name__
        outcome["kinds"] = [cls.__name__ for cls in type(error).__mro__]
        outcome["code"] = getattr(error, "code", None)
        outcome["detail"] = str(error)[:300]
    finally:
        await log.aclose()
    outcome["seconds"] = time.monotonic() - started
    outcome["fallbacks"] = dict(log.fallbacks)
    outcome["growth_mib"] = (peak_rss() - before) / MiB
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
