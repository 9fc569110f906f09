"""The generated code tables (`app/api/code_tables.py`): each file `make codes` writes is
what it would write now, so no client table and no fixture drifts from the service's."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.api.code_tables import PYTHON_CODES, TYPESCRIPT_CODES, group_class, main, render
from app.api.problem_table import ProblemGroup

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", list(render()), ids=str)
def test_the_generated_file_is_what_make_codes_writes_now(path: Path) -> None:
    written = (ROOT / path).read_text(encoding="utf-8")
    assert written == render()[path], f"{path} drifted from app/api/problem_table.py: make codes"


def test_each_group_has_one_class_name_in_both_clients() -> None:
    assert group_class(ProblemGroup.RETRY_LATER) == "RetryLaterError"
    names = {group_class(group) for group in ProblemGroup}
    assert len(names) == len(ProblemGroup)
    python, typescript = render()[PYTHON_CODES], render()[TYPESCRIPT_CODES]
    for name in names:
        assert f"class {name}(ServiceRefusal):" in python
        assert f"export class {name} extends ServiceRefusal {{}}" in typescript


def test_make_codes_writes_every_file_and_refuses_another_folder(tmp_path: Path) -> None:
    assert main(tmp_path) == 2
    for path in render():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    assert main(tmp_path) == 0
    assert all((tmp_path / p).read_text(encoding="utf-8") == t for p, t in render().items())
