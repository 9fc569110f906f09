"""`--tasks SPEC` (`app/gateway/task_spec.py`): the grammar (the command line refusing a
spec it cannot read is `test_cli.py`'s)."""

from __future__ import annotations

import pytest

from app.gateway.task_spec import TaskSpec, ToolTasks


def test_entries_name_tools_with_their_support_and_flags() -> None:
    spec = TaskSpec.parse(" slow , failing=required, asks=required+input-first ,plain=optional")
    assert spec.of("slow") == ToolTasks("optional")
    assert spec.of("failing") == ToolTasks("required")
    assert spec.of("asks") == ToolTasks("required", input_first=True)
    assert spec.of("plain") == ToolTasks("optional")
    assert spec.of("greet") is None


def test_a_star_names_every_tool_and_a_named_entry_wins() -> None:
    spec = TaskSpec.parse("*,greet=required")
    assert spec.of("anything") == ToolTasks("optional")
    assert spec.of("greet") == ToolTasks("required")


@pytest.mark.parametrize(
    "text", ["", " , ", "=required", "tool=always", "tool+later", "tool=required+input-first+x"]
)
def test_a_spec_it_cannot_read_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"task|flag"):
        TaskSpec.parse(text)
