"""The size rules the code keeps, so that each room stays one a newcomer can read whole.

- no source file of the service or of either client over 450 lines;
- no class of the service or of the Python client with more than 15 methods;
- no function of the service over 60 lines;
- at most two exception classes directly under a builtin in each package: each package has
  one root (`EventLogError`) and every other class is caught through it or through a group.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "app"
PYTHON_CLIENT = ROOT / "clients" / "python" / "src"
TYPESCRIPT_CLIENT = ROOT / "clients" / "typescript" / "src"

MAX_FILE_LINES = 450
MAX_METHODS = 15
MAX_FUNCTION_LINES = 60
MAX_ROOTS_UNDER_BUILTINS = 2

_BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
_TS_DIRECT_ERROR = re.compile(
    r"^\s*(?:export\s+)?class\s+(\w+)\s+extends\s+(?:Error|TypeError|RangeError|SyntaxError)\b"
)


def _python_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def _trees(path: Path) -> Iterator[ast.AST]:
    yield from ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_no_source_file_is_over_the_limit() -> None:
    sources = [
        *_python_files(SERVICE),
        *_python_files(PYTHON_CLIENT),
        *sorted(TYPESCRIPT_CLIENT.rglob("*.ts")),
    ]
    assert sources
    long = {
        _name(path): lines
        for path in sources
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_class_has_more_methods_than_the_limit() -> None:
    crowded = {
        f"{_name(path)}:{node.name}": methods
        for path in [*_python_files(SERVICE), *_python_files(PYTHON_CLIENT)]
        for node in _trees(path)
        if isinstance(node, ast.ClassDef)
        and (
            methods := sum(
                isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in node.body
            )
        )
        > MAX_METHODS
    }
    assert crowded == {}


def test_no_service_function_is_over_the_limit() -> None:
    long = {
        f"{_name(path)}:{node.name}": lines
        for path in _python_files(SERVICE)
        for node in _trees(path)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert long == {}


def _python_roots(root: Path) -> list[str]:
    return [
        f"{_name(path)}:{node.name}"
        for path in _python_files(root)
        for node in _trees(path)
        if isinstance(node, ast.ClassDef)
        and any(
            isinstance(base, ast.Name) and base.id in _BUILTIN_EXCEPTIONS for base in node.bases
        )
    ]


def _typescript_roots() -> list[str]:
    return [
        f"{_name(path)}:{match.group(1)}"
        for path in sorted(TYPESCRIPT_CLIENT.rglob("*.ts"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if (match := _TS_DIRECT_ERROR.match(line))
    ]


def test_each_package_has_at_most_two_exception_roots() -> None:
    for roots in (_python_roots(SERVICE), _python_roots(PYTHON_CLIENT), _typescript_roots()):
        assert 1 <= len(roots) <= MAX_ROOTS_UNDER_BUILTINS, roots


def test_the_counts_see_what_they_count() -> None:
    # The rules above would pass on an empty or misread tree: each walk must find its roots.
    assert "app/error_root.py:EventLogError" in _python_roots(SERVICE)
    assert any(root.endswith(":EventLogError") for root in _python_roots(PYTHON_CLIENT))
    assert any(root.endswith(":EventLogError") for root in _typescript_roots())
