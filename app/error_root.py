"""The root of the project's one error tree, alone in a module that imports nothing.

`app/errors.py` draws the tree the service raises from; the admin commands' HTTP client
(`app/admin_client.py`), which may import nothing of the server's insides (the import
contracts of pyproject.toml), derives its `AdminError` from this same root.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType


class EventLogError(Exception):
    """The root: a request that was not carried out; `code` says why, for programs."""

    code: str
    """The stable problem code (`superseded`, `seq_gap`, …) a client matches on."""
    members: Mapping[str, object] = MappingProxyType({})
    """Extension members the problem body carries besides `code` and `detail`."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
