"""Bodies of the admin API (`app/api/routes/admin_schemas.py`): the one request body an
operator sends, `ExplainRequest`, is strict; the answers take storage records as they are."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.api.routes.admin_schemas import ExplainRequest, GenerationCounts

CLAIM = "AAAAAAAAAAAAAAAAAAAAAA:1"


def test_an_explain_request_takes_a_claim_and_optionally_its_stream_and_tenant() -> None:
    assert ExplainRequest(last_event_id=CLAIM).stream_id is None
    full = ExplainRequest(last_event_id=CLAIM, stream_id="sess.1", tenant="acme")
    assert (full.stream_id, full.tenant) == ("sess.1", "acme")


@pytest.mark.parametrize(
    "body",
    [
        {"last_event_id": 1},
        {"last_event_id": CLAIM, "verbose": True},
        {"last_event_id": CLAIM, "stream_id": "has space"},
        {"last_event_id": CLAIM, "stream_id": "x" * 257},
        {"last_event_id": CLAIM, "tenant": ""},
        {"last_event_id": CLAIM, "tenant": "t" * 65},
        {"last_event_id": CLAIM, "tenant": "a\x00b"},
    ],
)
def test_an_explain_request_is_strict(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ExplainRequest.model_validate(body)


def test_counts_are_read_from_a_record_s_attributes() -> None:
    class Counts:
        live, terminal, superseded, abandoned, expired = 1, 2, 3, 4, 5

    counts = GenerationCounts.model_validate(Counts())
    assert counts.model_dump() == {
        "live": 1,
        "terminal": 2,
        "superseded": 3,
        "abandoned": 4,
        "expired": 5,
    }
