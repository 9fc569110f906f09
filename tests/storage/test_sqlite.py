"""SQLite's own hooks: a prefix match that keeps letter case and takes wildcards literally,
and a file that cannot be opened named before connecting, with its fix."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Column, MetaData, String, Table, create_engine, select

from app.storage.sqlite import SqliteDialect

_names = Table("names", MetaData(), Column("name", String))


def test_starts_with_keeps_letter_case_and_takes_wildcards_literally() -> None:
    engine = create_engine("sqlite://")
    rows = ["abc", "ABC", "a*c", "a?x", "a[b]", "ab"]
    with engine.begin() as conn:
        _names.create(conn)
        conn.execute(_names.insert(), [{"name": name} for name in rows])

        def matching(prefix: str) -> list[str]:
            where = SqliteDialect().starts_with(_names.c.name, prefix)
            return sorted(conn.execute(select(_names.c.name).where(where)).scalars())

        assert matching("ab") == ["ab", "abc"]
        assert matching("a*") == ["a*c"]
        assert matching("a?") == ["a?x"]
        assert matching("a[") == ["a[b]"]
    engine.dispose()


def test_a_missing_folder_is_named_before_connecting(tmp_path: Path) -> None:
    dialect = SqliteDialect()
    missing = tmp_path / "nowhere" / "log.db"
    problem = dialect.location_problem(f"sqlite+aiosqlite:///{missing}")
    assert problem is not None
    assert str(missing.parent) in problem
    assert "does not exist" in problem
    assert dialect.location_problem(f"sqlite+aiosqlite:///{tmp_path / 'log.db'}") is None
    assert dialect.location_problem("sqlite+aiosqlite:///:memory:") is None
