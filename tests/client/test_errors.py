"""The client's problem-code table is the service's, as one fixture says (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path

from mcp_eventlog_client import ServiceRefusal, error_for
from mcp_eventlog_client.errors import refusal_classes

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "problem-codes.json"


def documented() -> dict[str, int]:
    """Every problem code the service answers with, and its status."""
    codes = json.loads(FIXTURE.read_text())["codes"]
    assert [row["code"] for row in codes] == sorted(row["code"] for row in codes)
    return {row["code"]: row["status"] for row in codes}


def test_the_client_knows_every_code_the_service_answers_with_and_no_other() -> None:
    known = {code: cls.http_status for code, cls in refusal_classes().items()}
    assert known == documented()


def test_each_code_maps_to_its_own_class_whose_docstring_states_its_status() -> None:
    for code, status in documented().items():
        error = error_for(status, code, "detail")
        assert type(error) is not ServiceRefusal, code
        assert error.code == code
        assert (type(error).__doc__ or "").startswith(f"{status}:"), code


def test_a_code_the_client_does_not_know_is_a_bare_refusal() -> None:
    error = error_for(418, "teapot", "short and stout")
    assert type(error) is ServiceRefusal
    assert (error.status, error.code, error.detail) == (418, "teapot", "short and stout")
