"""Which tools the gateway runs as tasks: `EVENTLOG_GATEWAY_TASKS` (`--tasks SPEC`).

`SPEC` is a comma list of entries `name[=optional|=required][+input-first]`; `*` names
every tool (an entry naming the tool itself wins over `*`). `optional` (the default): a
requester that declared `io.modelcontextprotocol/tasks` gets a task, one that did not gets
the call run synchronously. `required`: one that did not gets -32021. `input-first`: the
tool asks for its input before the work starts (SEP-2663's MRTR → task composition): a
call that carries no `inputResponses` is forwarded synchronously, so its
`InputRequiredResult` reaches the requester as the MRTR round it is, and the call that
answers it becomes the task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Support = Literal["optional", "required"]
EVERY_TOOL = "*"
INPUT_FIRST = "input-first"


@dataclass(frozen=True, slots=True)
class ToolTasks:
    """How one tool is run as a task."""

    support: Support = "optional"
    input_first: bool = False


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """The parsed `--tasks` setting."""

    tools: dict[str, ToolTasks]

    @classmethod
    def parse(cls, text: str) -> TaskSpec:
        """`ValueError` for an entry that is not `name[=optional|=required][+input-first]`."""
        tools: dict[str, ToolTasks] = {}
        for raw in text.split(","):
            entry = raw.strip()
            if not entry:
                continue
            head, *flags = entry.split("+")
            name, _, support = head.partition("=")
            name, support = name.strip(), support.strip() or "optional"
            if not name or support not in ("optional", "required"):
                raise ValueError(f"not a task tool entry: {entry!r}")
            if any(flag.strip() != INPUT_FIRST for flag in flags):
                raise ValueError(f"unknown flag in {entry!r} (known: +{INPUT_FIRST})")
            required: Support = "required" if support == "required" else "optional"
            tools[name] = ToolTasks(required, input_first=bool(flags))
        if not tools:
            raise ValueError("the task spec names no tool")
        return cls(tools)

    def of(self, tool: str) -> ToolTasks | None:
        """How `tool` is run as a task (None: it is not, it passes through)."""
        return self.tools.get(tool) or self.tools.get(EVERY_TOOL)
