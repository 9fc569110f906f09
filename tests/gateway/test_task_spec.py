"""`--tasks SPEC` (`app/gateway/task_spec.py`): the grammar, and the command line refusing
a spec it cannot read before it starts anything."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.gateway.task_spec import TaskSpec, ToolTasks
from tests.support.processes import REPO, child_environment


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


def test_the_command_refuses_a_bad_spec_before_starting() -> None:
    env = child_environment({})
    flags = ["--upstream", "http://127.0.0.1:9/mcp", "--port", "0", "--tasks", "slow=sometimes"]
    done = subprocess.run(
        [sys.executable, "-m", "app", "gateway", *flags],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert b"--tasks: not a task tool entry: 'slow=sometimes'" in done.stderr


def test_the_command_offers_tasks() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", "gateway", "--help"],
        cwd=REPO,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert b"--tasks SPEC" in done.stdout
