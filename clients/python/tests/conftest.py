"""The Python client's tests use the service's test fixtures (`tests/conftest.py`: a
migrated database per backend, the app in-process, a service process per module) and its
support modules (`tests/support`), which the repository root on `sys.path` makes
importable (pyproject.toml: `pythonpath`).

This folder is not a package: the repository's `tests` is the one package of that name,
so each module here has a name of its own (rootless, as pytest imports them). A run of
the whole suite loads both conftests; each folder then has its own session fixtures (a
SQLite template, a PostgreSQL database), and the collection hook, which only adds marks
and skips, runs for each.
"""

from tests.conftest import (
    backend,
    base,
    client,
    database_url,
    http,
    migrated_database,
    postgres_database,
    pytest_collection_modifyitems,
    settings,
    sqlite_template,
)

__all__ = [
    "backend",
    "base",
    "client",
    "database_url",
    "http",
    "migrated_database",
    "postgres_database",
    "pytest_collection_modifyitems",
    "settings",
    "sqlite_template",
]
