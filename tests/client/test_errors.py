"""The client's problem-code table is the service's, as one fixture says (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path

from mcp_eventlog_client import ServiceRefusal, error_for
from mcp_eventlog_client.errors import refusal_classes

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "problem-codes.json"


def documented() -> dict[str, set[int]]:
    """Every problem code the service answers with, and its statuses (`expired` has two:
    409 on an append, 410 on a read)."""
    codes = json.loads(FIXTURE.read_text())["codes"]
    assert [row["code"] for row in codes] == sorted(row["code"] for row in codes)
    statuses: dict[str, set[int]] = {}
    for row in codes:
        statuses.setdefault(row["code"], set()).add(row["status"])
    return statuses


def test_the_client_knows_every_code_the_service_answers_with_and_no_other() -> None:
    known = refusal_classes()
    assert set(known) == set(documented())
    for code, statuses in documented().items():
        assert known[code].http_status in statuses, code


def test_each_code_maps_to_its_own_class_whose_docstring_states_its_statuses() -> None:
    for code, statuses in documented().items():
        error = error_for(min(statuses), code, "detail")
        assert type(error) is not ServiceRefusal, code
        assert error.code == code
        summary = (type(error).__doc__ or "").split("\n")[0]
        assert summary.startswith(f"{type(error).http_status}:"), code
        assert all(str(status) in summary for status in statuses), (code, summary)


def test_a_code_the_client_does_not_know_is_a_bare_refusal() -> None:
    error = error_for(418, "teapot", "short and stout")
    assert type(error) is ServiceRefusal
    assert (error.status, error.code, error.detail) == (418, "teapot", "short and stout")
