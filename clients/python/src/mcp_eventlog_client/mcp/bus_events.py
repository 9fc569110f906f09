"""How a server event of the 2026-07-28 revision is stored on a bus stream, and read back.

The convention both buses share (`EventLogSubscriptionBus` here, `EventLogServerEventBus`
in the TypeScript package), so a mixed fleet shares one bus; it is written once in
`docs/stream-names.md` ("Bus streams") and both test suites read its examples from
`tests/fixtures/bus-convention.json`:

- the bus named `<name>` (default `default`) is the service stream `mcp-bus.<name>`;
- each event is one stored event of SSE type `mcp-server-event` whose data is the compact
  JSON `{"method": …, "params": {…}}` of the notification the event becomes on a
  `subscriptions/listen` stream, without `jsonrpc`, `id` or `_meta` (the listen handler
  stamps its own subscription id): `notifications/resources/updated` with `{"uri"}`, and
  `notifications/{resources,tools,prompts}/list_changed` with `{}`;
- non-ASCII characters are written as they are (UTF-8), as `JSON.stringify` does.
"""

from __future__ import annotations

import json
import re
from typing import Final

from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)

STREAM_PREFIX: Final = "mcp-bus."
EVENT_TYPE: Final = "mcp-server-event"
DEFAULT_NAME: Final = "default"
_NAME = re.compile(r"[A-Za-z0-9._~:@=+-]{1,240}")

RESOURCE_UPDATED: Final = "notifications/resources/updated"
_LIST_CHANGED: Final[dict[str, ServerEvent]] = {
    "notifications/resources/list_changed": ResourcesListChanged(),
    "notifications/tools/list_changed": ToolsListChanged(),
    "notifications/prompts/list_changed": PromptsListChanged(),
}
_METHOD_OF: Final = {type(event): method for method, event in _LIST_CHANGED.items()}


def bus_stream(name: str = DEFAULT_NAME) -> str:
    """The service stream of the bus `name` (`ValueError` for a name the service refuses)."""
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"a bus name is 1-240 characters of A-Z a-z 0-9 . _ ~ : @ = + -: {name!r}")
    return STREAM_PREFIX + name


def encode(event: ServerEvent) -> str:
    """The stored data of `event`."""
    if isinstance(event, ResourceUpdated):
        document = {"method": RESOURCE_UPDATED, "params": {"uri": event.uri}}
    else:
        document = {"method": _METHOD_OF[type(event)], "params": {}}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def decode(data: str) -> ServerEvent | None:
    """The event stored as `data`, or None when it is not one of this convention."""
    try:
        document = json.loads(data)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    method, params = document.get("method"), document.get("params")
    if method in _LIST_CHANGED:
        return _LIST_CHANGED[method]
    if method == RESOURCE_UPDATED and isinstance(params, dict):
        uri = params.get("uri")
        if isinstance(uri, str):
            return ResourceUpdated(uri=uri)
    return None
