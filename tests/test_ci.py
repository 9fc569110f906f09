"""Under CI=true nothing may skip: every check for a missing server or tool ends in
`tests.support.needs.missing`, which fails there and skips (saying why) elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.needs import missing

TESTS = Path(__file__).resolve().parent
SKIP = re.compile(r"pytest\.(skip\(|importorskip\(|mark\.skip\b|mark\.skipif\b)")
# The skips that are not a missing server or tool: the soak marker (long variants run with
# `make soak`) and a soak variant that is a SQLite setting, skipped on its PostgreSQL run.
NOT_A_MISSING_TOOL = {
    "conftest.py",
    "reliability/test_crash_safety.py",
    "support/needs.py",
}


def test_a_missing_tool_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required here"):
        missing("a tool", "it is not installed")


def test_a_missing_tool_skips_with_its_reason_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="a tool is missing: it is not installed"):
        missing("a tool", "it is not installed")


def test_required_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.fail.Exception):
        missing("PostgreSQL", "unreachable", required=True)


def test_no_other_module_skips_by_itself() -> None:
    skipping = {
        path.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("*.py")
        if "node_modules" not in path.parts and SKIP.search(path.read_text())
    }
    skipping.discard(Path(__file__).name)
    assert skipping - NOT_A_MISSING_TOOL == set(), "skip through tests.support.needs.missing"
