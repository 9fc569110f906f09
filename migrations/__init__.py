"""The alembic migrations; installed as the package `app.migrations` (see pyproject.toml)."""
