"""How `make test` shares the suite between its two pytest-xdist workers.

A module is one unit of work (its module-scoped servers start once, on one worker), and so
is each folder whose tests share a session fixture that must not be built twice at once:
tests/release builds the release (`make dist`, which runs `npm ci` in the TypeScript
package) once. Units go out largest first (xdist's `loadscope` order).
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

# Folders run as one unit on one worker, each with the reason in the module docstring.
ONE_UNIT = ("tests/release/",)


class ModuleScheduling(LoadScopeScheduling):
    """`loadscope` (a module per unit), with each folder of `ONE_UNIT` one unit."""

    def _split_scope(self, nodeid: str) -> str:
        for folder in ONE_UNIT:
            if nodeid.startswith(folder):
                return folder
        return nodeid.split("::", 1)[0]


def make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    """The scheduler of `--dist loadscope`; None (xdist's own) for every other mode."""
    if config.getvalue("dist") != "loadscope":
        return None
    return ModuleScheduling(config, log)
