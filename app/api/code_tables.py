"""Writes the clients' code tables and the fixture from the service's (`make codes`).

`app/api/problem_table.py` is the one source of the problem codes. Three files are written
from it, never by hand: the Python client's `codes.py`, the TypeScript client's `codes.ts`
(one exception class per group, one per code under its group: a line each, whose base
`refusal()` of `error-base.ts` gives the code and its statuses) and
`tests/fixtures/problem-codes.json` (what both clients' suites read).
`tests/api/test_code_tables.py` fails when a file differs from what `render()` gives now.

Run from the repository's root: `python -m app.api.code_tables` (or `make codes`).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

from app.api.problem_table import (
    ADVICE,
    PROBLEM_CODES,
    SECOND_ROWS,
    ProblemCode,
    ProblemGroup,
    problem_codes,
)

PYTHON_CODES = Path("clients/python/src/mcp_eventlog_client/codes.py")
TYPESCRIPT_CODES = Path("clients/typescript/src/codes.ts")
FIXTURE = Path("tests/fixtures/problem-codes.json")
_WHY = "`tests/api/test_code_tables.py` fails when this file is not what `make codes` writes"


def group_class(group: ProblemGroup) -> str:
    """The group's exception class in both clients: `retry_later` → `RetryLaterError`."""
    return "".join(word.capitalize() for word in group.value.split("_")) + "Error"


def _classes() -> Iterator[tuple[ProblemGroup, list[tuple[str, str, list[ProblemCode]]]]]:
    """Per group (in the table's order), its codes: (class, code, rows: its own first)."""
    for group in ProblemGroup:
        yield (
            group,
            [
                (row.name, code, [row, *(r for c, r in SECOND_ROWS if c == code)])
                for code, row in sorted(PROBLEM_CODES.items())
                if row.group is group
            ],
        )


def _summary(rows: list[ProblemCode]) -> str:
    """`410: <meaning> (409: <meaning>)`: the code's row, then its second status."""
    first, *others = rows
    return (
        f"{first.status}: {first.meaning}"
        + "".join(f" ({row.status}: {row.meaning})" for row in others)
        + "."
    )


def _docstring(text: str, indent: str) -> Iterator[str]:
    lines = textwrap.wrap(text, 100 - len(indent) - 6, break_on_hyphens=False)
    lines[0] = '"""' + lines[0]
    lines[-1] += '"""'
    yield from (indent + line for line in lines)


def _jsdoc(text: str, indent: str = "") -> Iterator[str]:
    if len(indent) + len(text) + 7 <= 100:
        yield f"{indent}/** {text} */"
        return
    yield f"{indent}/**"
    yield from (f"{indent} * {line}" for line in textwrap.wrap(text, 96 - len(indent)))
    yield f"{indent} */"


def render_python() -> str:
    """The Python client's `codes.py`."""
    out = [
        '"""The service\'s problem codes as exception classes, each under the group that says',
        "what a caller does next (`errors.py` draws the whole tree).",
        "",
        "Written by `make codes` from the service's table (`app/api/problem_table.py`); do not",
        "edit it here: `tests/api/test_code_tables.py` fails when this file is not what",
        "`make codes` writes.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Mapping",
        "from types import MappingProxyType",
        "",
        "from mcp_eventlog_client.error_base import ServiceRefusal",
    ]
    for group, codes in _classes():
        out += ["", "", f"class {group_class(group)}(ServiceRefusal):"]
        out += _docstring(ADVICE[group], "    ")
        for name, code, rows in codes:
            out += ["", "", f"class {name}({group_class(group)}):"]
            out += _docstring(_summary(rows), "    ")
            out += ["", f'    code = "{code}"', f"    http_status = {rows[0].status}"]
    out += ["", "", "GROUPS: Mapping[str, type[ServiceRefusal]] = MappingProxyType("]
    out += ["    {"] + [f'        "{g.value}": {group_class(g)},' for g in ProblemGroup]
    out += ["    }", ")", '"""Each group of the service\'s table, by its name, with its class."""']
    out += [
        "REFUSALS: Mapping[str, type[ServiceRefusal]] = MappingProxyType(",
        "    {kind.code: kind for group in GROUPS.values() for kind in group.__subclasses__()}",
        ")",
        '"""Every problem code of the service\'s table, with its class."""',
    ]
    return "\n".join(out) + "\n"


def _class_line(name: str, arguments: list[str]) -> list[str]:
    """`export class <name> extends refusal(<arguments>) {}`: one line, or as prettier wraps it."""
    line = f"export class {name} extends refusal({', '.join(arguments)}) {{}}"
    if len(line) <= 100:
        return [line]
    return [f"export class {name} extends refusal(", *(f"  {a}," for a in arguments), ") {}"]


def render_typescript() -> str:
    """The TypeScript client's `codes.ts`."""
    out = [
        "/**",
        " * The service's problem codes as error classes, each under the group that says what a",
        " * caller does next (`errors.ts` draws the whole tree).",
        " *",
        " * Written by `make codes` from the service's table (`app/api/problem_table.py`); do not",
        " * edit it here: `tests/api/test_code_tables.py` fails when this file is not what",
        " * `make codes` writes.",
        " */",
        "",
        'import { type RefusalClass, refusal, ServiceRefusal } from "./error-base.js";',
        "",
        "type Group = typeof ServiceRefusal;",
    ]
    for group, codes in _classes():
        out += [""]
        out += _jsdoc(ADVICE[group])
        out += [f"export class {group_class(group)} extends ServiceRefusal {{}}"]
        for name, code, rows in codes:
            statuses = ", ".join(str(status) for status in sorted(row.status for row in rows))
            out += [""]
            out += _jsdoc(_summary(rows))
            out += _class_line(name, [group_class(group), f'"{code}"', f"[{statuses}]"])
    out += ["", "/** Each group of the service's table, by its name, with its class. */"]
    out += ["export const GROUPS: ReadonlyMap<string, Group> = new Map<string, Group>(["]
    out += [f'  ["{g.value}", {group_class(g)}],' for g in ProblemGroup]
    out += ["]);", "", "/** Every problem code of the service's table, with its class. */"]
    out += [
        "export const REFUSALS: ReadonlyMap<string, RefusalClass> = new Map<string, RefusalClass>(["
    ]
    out += [f'  ["{code}", {name}],' for _, codes in _classes() for name, code, _ in codes]
    out += ["]);"]
    return "\n".join(out) + "\n"


def render_fixture() -> str:
    """`tests/fixtures/problem-codes.json`, what both clients' suites check their tables by."""
    document = {
        "description": (
            "Every problem code the service answers with: its HTTP status, its group (what a "
            "caller does next) and what it means, one row per (code, status), sorted by code "
            "then status. Written by `make codes` from app/api/problem_table.py; "
            + _WHY
            + ". A code may have two rows: `expired` is 409 on an append and 410 on a read."
        ),
        "groups": {group.value: ADVICE[group] for group in ProblemGroup},
        "codes": [
            {"code": r.code, "status": r.status, "group": r.group.value, "meaning": r.meaning}
            for r in problem_codes()
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def render() -> dict[Path, str]:
    """Each generated file (relative to the repository's root) with its text."""
    return {
        PYTHON_CODES: render_python(),
        TYPESCRIPT_CODES: render_typescript(),
        FIXTURE: render_fixture(),
    }


def main(root: Path = Path()) -> int:
    """Write every generated file under `root`; say which changed."""
    if not (root / "clients").is_dir():
        print(f"{root.resolve()} is not the repository's root", file=sys.stderr)
        return 2
    for path, text in render().items():
        target = root / path
        changed = not target.exists() or target.read_text(encoding="utf-8") != text
        target.write_text(text, encoding="utf-8")
        print(f"{'wrote' if changed else 'kept '} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
