"""The error table (`app/api/problem_table.py`, answered by `app/api/problems.py`): one row
per problem code, each row reachable and in one group, the same rows as
`tests/fixtures/problem-codes.json`, and every error of the tree answered through it
(status, headers, detail, extension members)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.exceptions import HTTPException

from app.api.frontdoor.connections import CONNECTION_CODES
from app.api.problem_table import SECOND_ROWS, ProblemGroup, problem_codes
from app.api.problems import (
    HTTP_ERROR_CODES,
    PROBLEM_CODES,
    answer,
    problem_code,
)
from app.api.routes.health import _CODES as READINESS_CODES
from app.domain.append import AppendConflict
from app.domain.decision import DECISION_TABLE, Reason, Verdict
from app.domain.paging import PageRefusal
from app.domain.tasks import TaskRefusal
from app.errors import (
    ConflictingBatch,
    EventLogError,
    InvalidClaim,
    PageOutOfRange,
    StorageFailed,
    StorageUnavailable,
    TaskConflict,
    TaskEventsGone,
    TooManyReaders,
    Unauthenticated,
    UnknownGeneration,
)
from tests.support.app import make_settings, started_app

FIXTURE = Path(__file__).parents[1] / "fixtures" / "problem-codes.json"
INVALID_REASONS = [row.reason for row in DECISION_TABLE if row.verdict is Verdict.INVALID]


def _tree(root: type[EventLogError]) -> list[type[EventLogError]]:
    """The errors the service raises: those of `app/errors.py` (the admin client's own
    `AdminError` shares the root, and is never answered by the service)."""
    kinds = [root, *(kind for sub in root.__subclasses__() for kind in _tree(sub))]
    return [kind for kind in kinds if kind.__module__ in {"app.errors", "app.error_root"}]


def _leaves() -> list[type[EventLogError]]:
    return [kind for kind in _tree(EventLogError) if not kind.__subclasses__()]


# The errors whose code is the value of a domain enum they carry, one instance per value.
CARRIED: dict[type[EventLogError], list[EventLogError]] = {
    ConflictingBatch: [ConflictingBatch(c, "d") for c in AppendConflict],
    PageOutOfRange: [PageOutOfRange(r, "d") for r in PageRefusal],
    InvalidClaim: [InvalidClaim(r, "d") for r in INVALID_REASONS],
    TaskConflict: [TaskConflict(r, "d") for r in TaskRefusal],
}


def test_the_fixture_holds_the_table_row_for_row() -> None:
    document = json.loads(FIXTURE.read_text(encoding="utf-8"))
    rows = document["codes"]
    assert all(set(row) == {"code", "status", "group", "meaning"} for row in rows)
    assert [(r["code"], r["status"], r["group"], r["meaning"]) for r in rows] == [
        (row.code, row.status, row.group.value, row.meaning) for row in problem_codes()
    ]
    assert [r["code"] for r in rows] == sorted(r["code"] for r in rows)
    assert set(document["groups"]) == {group.value for group in ProblemGroup}


def test_each_code_is_in_one_group_under_one_class_name_and_each_group_has_codes() -> None:
    names = [row.name for row in PROBLEM_CODES.values()]
    assert len(set(names)) == len(names)
    assert all(name.isidentifier() and name[0].isupper() for name in names)
    for code, second in SECOND_ROWS:
        own = PROBLEM_CODES[code]
        assert (second.group, second.name) == (own.group, own.name), code
        assert second.status != own.status, code
    assert {row.group for row in PROBLEM_CODES.values()} == set(ProblemGroup)


@pytest.mark.parametrize(
    ("group", "statuses"),
    [
        (ProblemGroup.NOT_FOUND, {404}),
        (ProblemGroup.GONE, {410}),
        (ProblemGroup.TOO_LARGE, {413, 431}),
        (ProblemGroup.RETRY_LATER, {408, 502, 503}),
        (ProblemGroup.FENCED, {409}),
        (ProblemGroup.CONFLICT, {409}),
        (ProblemGroup.ACCESS_DENIED, {401, 403, 421}),
        (ProblemGroup.SERVICE_FAULT, {500}),
    ],
)
def test_a_group_holds_only_the_statuses_its_advice_fits(
    group: ProblemGroup, statuses: set[int]
) -> None:
    """`expired` is `gone` on a read (410) and on an append (409) alike: one code, one group."""
    rows = [row for row in problem_codes() if row.group is group and row.code != "expired"]
    assert rows
    assert {row.status for row in rows} <= statuses, group


def test_every_answer_with_retry_after_is_in_the_retry_later_group() -> None:
    for code, row in PROBLEM_CODES.items():
        if "Retry-After" in row.headers:
            assert row.group is ProblemGroup.RETRY_LATER, code


def test_every_error_of_the_tree_has_a_row_and_every_row_is_answered() -> None:
    answered: set[str] = set()
    for leaf in _leaves():
        if leaf in CARRIED:
            answered.update(error.code for error in CARRIED[leaf])
        else:
            assert "code" in vars(leaf), f"{leaf.__name__} has no code"
            answered.add(vars(leaf)["code"])
    answered.update(HTTP_ERROR_CODES.values(), READINESS_CODES.values(), {"internal_error"})
    answered.update(CONNECTION_CODES)  # answered by the server's protocol, before the app
    assert answered == set(PROBLEM_CODES)
    assert all(PROBLEM_CODES[code].status == s for s, code in HTTP_ERROR_CODES.items())


@pytest.mark.parametrize(
    ("error", "status"),
    [
        *[(e, 409) for e in CARRIED[ConflictingBatch]],  # `expired` too: every append conflict
        (PageOutOfRange(PageRefusal.BEYOND_TAIL, "d"), 409),
        (PageOutOfRange(PageRefusal.EXPIRED, "d"), 410),
        (PageOutOfRange(PageRefusal.EVICTED, "d"), 410),
        (InvalidClaim(Reason.MALFORMED_ID, "d"), 400),
        (InvalidClaim(Reason.UNKNOWN_GENERATION, "d"), 404),
        (InvalidClaim(Reason.CROSS_STREAM, "d"), 409),
        (InvalidClaim(Reason.BEYOND_TAIL, "d"), 409),
    ],
    ids=lambda value: getattr(value, "code", None) or str(value),
)
def test_the_errors_that_carry_a_domain_value_keep_their_statuses(
    error: EventLogError, status: int
) -> None:
    assert problem_code(error).status == status
    assert answer(error).status_code == status


def _body(error: EventLogError) -> tuple[int, dict[str, Any], dict[str, str]]:
    response = answer(error)
    return response.status_code, json.loads(response.body), dict(response.headers)


def test_an_invalid_claim_says_its_verdict_and_a_lookup_does_not() -> None:
    status, claim, _ = _body(InvalidClaim(Reason.UNKNOWN_GENERATION, "no such generation"))
    assert (status, claim["code"], claim["verdict"]) == (404, "unknown_generation", "invalid")
    status, lookup, _ = _body(UnknownGeneration("tok"))
    assert (status, lookup["code"], lookup["detail"]) == (
        404,
        "unknown_generation",
        "no generation 'tok' here",
    )
    assert "verdict" not in lookup


def test_a_task_conflict_answers_409_and_gone_task_events_say_where_to_start() -> None:
    assert {answer(e).status_code for e in CARRIED[TaskConflict]} == {409}
    status, body, _ = _body(TaskEventsGone("events after 3 were evicted", earliest_seq=7))
    assert (status, body["code"], body["earliest_seq"]) == (410, "evicted", 7)


def test_headers_and_details_come_from_the_row() -> None:
    status, body, headers = _body(StorageUnavailable("connection refused (driver text)"))
    assert (status, headers["retry-after"]) == (503, "1")
    assert "connection" not in headers
    assert body["detail"] == "the database is unavailable; nothing was stored, retry later"
    status, body, _ = _body(StorageFailed("syntax error at or near …"))
    assert (status, body["detail"]) == (500, "the database failed; nothing was stored")
    status, _, headers = _body(TooManyReaders("5 live readers already"))
    assert (status, headers["retry-after"], headers["connection"]) == (503, "1", "close")
    status, _, headers = _body(Unauthenticated("send Authorization: Bearer <key>"))
    assert (status, headers["www-authenticate"]) == (401, 'Bearer realm="mcp-eventlog"')


async def test_an_http_error_without_a_code_is_a_defect_not_a_new_code(
    database_url: str,
) -> None:
    async def teapot() -> None:
        raise HTTPException(status_code=418)

    async with started_app(make_settings(database_url)) as (app, http):
        app.add_api_route("/test/teapot", teapot)
        answer_ = await http.get("/test/teapot")
        allowed = await http.delete("/healthz")
    assert (answer_.status_code, answer_.json()["code"]) == (500, "internal_error")
    assert (allowed.status_code, allowed.json()["code"]) == (405, "method_not_allowed")
    assert allowed.headers["allow"]


async def test_the_framework_errors_are_rows_of_the_table(client: httpx.AsyncClient) -> None:
    missing = await client.get("/nope")
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
