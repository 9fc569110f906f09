"""Which session and SDK stream each generation (and placeholder) of this process belongs to."""

from __future__ import annotations

from collections import OrderedDict

from mcp_eventlog_client.mcp.replay import Owner


class Owners:
    """The owner of each generation this process opened and each placeholder it handed out,
    so a replay is decided on its own stream's route, and another session's token, or a
    broken generation's, is refused without asking the service.

    Bounded (the oldest is forgotten first): a forgotten token falls back to `/v1/resume`
    and a check of the stream the service names.
    """

    def __init__(self, bound: int) -> None:
        self._owners: OrderedDict[str, Owner] = OrderedDict()
        self._bound = bound

    def own(self, token: str, owner: Owner) -> None:
        """Record (or replace) the owner of `token`."""
        self._owners[token] = owner
        self._owners.move_to_end(token)
        while len(self._owners) > self._bound:
            self._owners.popitem(last=False)

    def get(self, token: str) -> Owner | None:
        """The owner of `token`, if it is still remembered."""
        return self._owners.get(token)
