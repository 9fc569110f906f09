"""How the service writes one Server-Sent Event: the live reads' frames and the gateway's
relayed messages alike (the HTML standard's `text/event-stream`).

Fields in a fixed order (`retry`, `id`, `event`, then the data), each line ended by LF, the
event by a blank line. SSE ends a line at CR, LF or CRLF and joins `data` lines with LF:
data with LF line ends arrives exactly, and a CR, which cannot be carried, arrives as LF.
"""

from __future__ import annotations


def event_text(
    data: str | None, *, id: str | None = None, event: str | None = None, retry: int | None = None
) -> str:
    """One event as written on the wire (`data` None: no data line; `""`: an empty one)."""
    lines: list[str] = []
    if retry is not None:
        lines.append(f"retry: {retry}")
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    if data is not None:
        text = data.replace("\r\n", "\n").replace("\r", "\n")
        lines.extend(f"data: {line}" for line in text.split("\n"))
    return "\n".join(lines) + "\n\n"
