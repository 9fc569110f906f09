"""The README stays true: every setting is documented, and the two commands are there."""

from __future__ import annotations

from pathlib import Path

from app.settings import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_in_the_readme() -> None:
    missing = [
        f"EVENTLOG_{name.upper()}"
        for name in Settings.model_fields
        if f"EVENTLOG_{name.upper()}" not in README
    ]
    assert missing == []


def test_the_two_commands_are_make_targets() -> None:
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    for command in ("make run", "make test"):
        assert command in README
        assert f"\n{command.split()[1]}:" in makefile
