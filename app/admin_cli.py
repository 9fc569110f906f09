"""`mcp-eventlog admin …`: the operator's commands over the admin API.

Readable tables by default, the service's JSON with `--json`. The URL and key come from
`--url`/`--key` or `EVENTLOG_URL`/`EVENTLOG_ADMIN_KEY`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from app.admin_client import DEFAULT_URL, AdminClient, AdminError
from app.text import printable

COMMANDS = ("streams", "stream", "explain", "stats", "decisions")


def add_admin_parser(commands: Any) -> None:
    """Add `admin` and its subcommands to the CLI's subparsers."""
    admin = commands.add_parser("admin", help="look inside the log (admin API)")
    admin.add_argument("--url", default=os.environ.get("EVENTLOG_URL", DEFAULT_URL))
    admin.add_argument("--key", default=os.environ.get("EVENTLOG_ADMIN_KEY"), help="an admin key")
    admin.add_argument("--json", action="store_true", help="print the service's JSON")
    which = admin.add_subparsers(dest="admin_command", required=True)
    streams = which.add_parser("streams", help="list streams with their current generation")
    streams.add_argument("--prefix", default="")
    streams.add_argument("--tenant")
    streams.add_argument("--limit", type=int, default=50)
    streams.add_argument("--cursor")
    stream = which.add_parser("stream", help="a stream and all its generations")
    stream.add_argument("stream_id")
    stream.add_argument("--tenant")
    explain = which.add_parser(
        "explain",
        help="why a Last-Event-ID gets its verdict",
        epilog="A generation token can begin with '-' (it is URL-safe base64): put the ids "
        "after '--', e.g. `mcp-eventlog admin explain -- my-stream -Zx…:4`.",
    )
    explain.add_argument("stream_id")
    explain.add_argument("last_event_id")
    explain.add_argument("--tenant", help="decide as that tenant's writer would")
    which.add_parser("stats", help="counts across the log and verdicts by reason")
    decisions = which.add_parser("decisions", help="recent resume decisions")
    decisions.add_argument("--stream", dest="stream_id")
    decisions.add_argument("--verdict", choices=("resume", "reset", "invalid"))
    decisions.add_argument("--reason")
    decisions.add_argument("--tenant")
    decisions.add_argument("--limit", type=int, default=50)


async def run_admin(args: argparse.Namespace, client: AdminClient, out: TextIO = sys.stdout) -> int:
    """Run one admin command; 0 on success, 1 when the service refused it."""
    try:
        body = await _fetch(args, client)
    except AdminError as failure:
        print(f"error: {describe(failure, args.url)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(body, indent=2), file=out)
    else:
        print(RENDERERS[args.admin_command](body), file=out)
    return 0


async def _fetch(args: argparse.Namespace, client: AdminClient) -> dict[str, Any]:
    command = args.admin_command
    if command == "streams":
        return await client.streams(
            prefix=args.prefix, tenant=args.tenant, limit=args.limit, cursor=args.cursor
        )
    if command == "stream":
        return await client.stream(args.stream_id, tenant=args.tenant)
    if command == "explain":
        return await client.explain(
            args.last_event_id, stream_id=args.stream_id, tenant=args.tenant
        )
    if command == "stats":
        return await client.stats()
    return await client.decisions(
        stream_id=args.stream_id,
        verdict=args.verdict,
        reason=args.reason,
        tenant=args.tenant,
        limit=args.limit,
    )


def describe(failure: AdminError, url: str) -> str:
    """A refusal or an unreachable service, in words, every value from outside escaped."""
    if failure.status == 0:
        return f"cannot reach the service at {printable(url)}: {printable(failure.detail)}"
    return f"{failure.status} {printable(failure.code)}: {printable(failure.detail)}"


def plural(count: int, noun: str) -> str:
    """`1 event`, `2 events`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain, aligned text table."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = [headers, ["-" * w for w in widths], *cells]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _cell(value: object) -> str:
    # Every value comes from the service, and many from its writers (a producer, a claim):
    # control and bidi characters are shown escaped, never sent to the terminal.
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return printable(str(value))


def state_of(gen: dict[str, Any]) -> str:
    """One word for a generation's state (the same precedence as `stats`)."""
    if gen["expired"]:
        return "expired"
    if gen["terminal"]:
        return "terminal"
    if gen["superseded"]:
        return "superseded"
    if gen.get("abandoned"):
        return "abandoned"
    return "live"


def _time(stamp: str | None) -> str | None:
    return None if stamp is None else stamp[:19].replace("T", " ")


def render_streams(body: dict[str, Any]) -> str:
    """The stream listing."""
    rows = []
    for s in body["streams"]:
        cur = s["current"] or {}
        rows.append(
            [
                s["stream_id"],
                s["tenant"],
                s["generations"],
                cur.get("generation"),
                state_of(cur) if cur else None,
                cur.get("head_seq"),
                cur.get("tail_seq"),
                cur.get("retained_events"),
                _time(s["updated_at"]),
            ]
        )
    headers = ["STREAM", "TENANT", "GENS", "CURRENT", "STATE", "HEAD", "TAIL", "KEPT", "UPDATED"]
    text = table(headers, rows)
    if body.get("next_cursor"):
        text += f"\nmore: --cursor {printable(body['next_cursor'])}"
    return text


def render_stream(body: dict[str, Any]) -> str:
    """A stream's generations, oldest first."""
    rows = [
        [
            g["epoch"],
            g["generation"],
            state_of(g),
            g["reason"],
            g["producer"],
            g["head_seq"],
            g["tail_seq"],
            g["terminal_seq"],
            g["retained_events"],
            g["retained_bytes"],
            _time(g["last_append_at"]),
        ]
        for g in body["generations"]
    ]
    headers = ["EPOCH", "GENERATION", "STATE", "REASON", "PRODUCER", "HEAD", "TAIL", "TERMINAL"]
    headers += ["KEPT", "BYTES", "LAST WRITE"]
    title = f"stream {printable(body['stream_id'])} (tenant {printable(body['tenant'])})"
    return title + "\n" + table(headers, rows)


def render_explain(body: dict[str, Any]) -> str:
    """The verdict, then the table of checks in order."""
    lines = [
        printable(f"{body['verdict']} / {body['reason']}: {body['detail']}"),
        "",
        table(
            ["#", "CONDITION", "IF MATCHED", "OUTCOME"],
            [
                [
                    c["row"],
                    c["condition"],
                    f"{c['verdict']} {c['reason']}",
                    "MATCH" if c["matched"] else "no",
                ]
                for c in body["checks"]
            ],
        ),
    ]
    gen = body.get("generation")
    if gen:
        lines += [
            "",
            printable(
                f"generation {gen['generation']}: epoch {gen['epoch']} of {gen['stream_id']} "
                f"(tenant {gen['tenant']}), {state_of(gen)}, head {gen['head_seq']}, "
                f"tail {gen['tail_seq']}, {plural(gen['retained_events'], 'event')} kept"
            ),
        ]
        if gen.get("abandoned_at"):
            lines.append(
                printable(f"abandoned at {_time(gen['abandoned_at'])}: its writer's lease ran out")
            )
    deliver = body.get("would_deliver")
    if deliver:
        lines.append(
            printable(
                f"would deliver: {plural(deliver['events'], 'event')} of "
                f"{deliver['generation']} after seq {deliver['after']}"
            )
        )
    elif body["verdict"] == "reset":
        lines.append("would deliver: nothing; the caller opens a new generation")
    return "\n".join(lines)


def render_stats(body: dict[str, Any]) -> str:
    """Totals, then verdicts by reason."""
    g = body["generations"]
    lines = [
        f"streams          {body['streams']}",
        f"generations      live {g['live']}, terminal {g['terminal']}, "
        f"superseded {g['superseded']}, abandoned {g.get('abandoned', 0)}, "
        f"expired {g['expired']}",
        f"retained events  {body['retained_events']}",
        f"retained bytes   {body['retained_bytes']}",
        "",
        table(
            ["VERDICT", "REASON", "COUNT"],
            [[v["verdict"], v["reason"], v["count"]] for v in body["verdicts"]],
        ),
    ]
    return "\n".join(lines)


def render_decisions(body: dict[str, Any]) -> str:
    """Recent decisions, newest first."""
    rows = [
        [
            _time(d["decided_at"]),
            d["tenant"],
            d["stream_id"],
            d["last_event_id"],
            d["verdict"],
            d["reason"],
            d["generation"],
            d["events"],
        ]
        for d in body["decisions"]
    ]
    headers = ["TIME", "TENANT", "STREAM", "LAST-EVENT-ID", "VERDICT", "REASON", "DELIVERED"]
    return table([*headers, "EVENTS"], rows)


RENDERERS = {
    "streams": render_streams,
    "stream": render_stream,
    "explain": render_explain,
    "stats": render_stats,
    "decisions": render_decisions,
}
