"""The README and the docs stay true: every setting is documented, the decision table is
the code's, and the two commands are there."""

from __future__ import annotations

import re
from pathlib import Path

from app.domain.decision import DECISION_TABLE
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()


def test_every_setting_is_on_the_configuration_page() -> None:
    missing = [
        f"EVENTLOG_{name.upper()}"
        for name in Settings.model_fields
        if f"`EVENTLOG_{name.upper()}`" not in CONFIGURATION
    ]
    assert missing == []


def test_the_readme_decision_table_is_the_codes() -> None:
    rows = re.findall(r"^\| (\d+[ab]?) \| (.+?) \| (\w+) \| `(\w+)` \|$", README, re.MULTILINE)
    assert rows == [
        (str(row.number), row.condition, row.verdict.value, row.reason.value)
        for row in DECISION_TABLE
    ]


def test_the_two_commands_are_make_targets() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for command in ("make run", "make test"):
        assert command in README
        assert f"\n{command.split()[1]}:" in makefile


def test_every_docs_link_resolves() -> None:
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def _links(markdown: str) -> set[str]:
    return set(re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", markdown))


def test_every_docs_page_is_in_the_index_and_in_the_readmes_table() -> None:
    pages = {path.name for path in (ROOT / "docs").glob("*.md")}
    index = _links((ROOT / "docs" / "README.md").read_text())
    table = README.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    rows = _links("\n".join(line for line in table.splitlines() if line.startswith("|")))
    assert sorted(pages - {"README.md"} - index) == [], "docs/README.md does not list them"
    assert sorted(f"docs/{page}" for page in pages if f"docs/{page}" not in rows) == []
