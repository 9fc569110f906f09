"""How the process logs (`app/logs.py`): text and JSON lines, tracebacks, the drivers' level."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from app.logs import TEXT_FORMAT, JsonFormatter, RequestIdFilter, TextFormatter, logging_config
from tests.support.app import make_settings


def test_a_traceback_in_a_text_line_is_indented_and_escaped() -> None:
    try:
        raise ValueError("bad\n2026-11-30 12:00:00,000 ERROR forged\x1b]0;title\x07")
    except ValueError:
        record = logging.LogRecord("app", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    record.request_id = None
    text = TextFormatter(fmt=TEXT_FORMAT).format(record)
    first, *rest = text.splitlines()
    assert first.endswith("boom")
    assert rest
    assert all(line.startswith("    ") for line in rest)
    assert not set(text) & {"\x1b", "\x07"}


def test_json_log_lines() -> None:
    record = logging.makeLogRecord(
        {"name": "app.access", "levelname": "INFO", "msg": "GET %s", "args": ("/x",)}
    )
    record.route = "/x"
    RequestIdFilter().filter(record)
    line = json.loads(JsonFormatter().format(record))
    assert (line["message"], line["route"], line["request_id"], line["level"]) == (
        "GET /x",
        "/x",
        None,
        "info",
    )
    config = logging_config(make_settings("sqlite://", log_format="json"))
    assert config["formatters"]["main"]["()"].endswith("JsonFormatter")
    text = logging_config(make_settings("sqlite://"))["formatters"]["main"]
    assert text["()"].endswith("TextFormatter")


@pytest.mark.parametrize("level", ["debug", "info", "warning"])
def test_database_drivers_never_log_statements(level: str) -> None:
    # At DEBUG the drivers log each statement with its parameters: event data.
    config = logging_config(make_settings("sqlite://", log_level=level))
    floor = max(logging.WARNING, logging.getLevelNamesMapping()[level.upper()])
    for driver in ("aiosqlite", "asyncpg", "sqlalchemy.engine"):
        assert config["loggers"][driver]["level"] == floor
