"""Fuzzing from the OpenAPI document: schemathesis against a real server process.

Positive cases (valid by the schema) and negative ones (schema-invalid data) are sent to
every operation of `/openapi.json`. Every response must be no 5xx, carry a documented status
and content type, and match its documented schema; schema-invalid input must be refused.
It runs once with the service open (no keys) and once with keys, each operation called
with a key of its audience (`/admin/...` an admin key, the rest a writer key). The
`Authorization` header itself is not fuzzed here; `test_security.py` covers auth.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.processes import ServerProcess
from tests.support.soak import soak_enabled

pytestmark = pytest.mark.process

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


WRITER_KEY, ADMIN_KEY = "writer-key-" + "w" * 24, "admin-key-" + "a" * 24
KEYS = json.dumps([{"scope": "writer", "key": WRITER_KEY}, {"scope": "admin", "key": ADMIN_KEY}])


def _key_for(case: schemathesis.Case) -> dict[str, str]:
    key = ADMIN_KEY if case.path.startswith("/admin/") else WRITER_KEY
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("keyed", [False, True], ids=["open", "keyed"])
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_survives_fuzzing(
    server: ServerProcess, mode: GenerationMode, keyed: bool
) -> None:
    """No 5xx, only documented statuses, bodies matching the schema; bad input refused."""
    if keyed:
        server.extra_env["EVENTLOG_KEYS"] = KEYS
    server.start()
    generation = {"with-security-parameters": False}
    config = SchemathesisConfig.from_dict({"generation": generation})
    schema = schemathesis.openapi.from_url(f"{server.base_url}/openapi.json", config=config)
    strategy = schema.as_strategy(generation_mode=mode)

    @given(case=strategy)
    @settings(
        max_examples=300 if soak_enabled() else 40,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case: schemathesis.Case) -> None:
        headers = _key_for(case) if keyed else None
        case.call_and_validate(base_url=server.base_url, headers=headers, checks=CHECKS, timeout=30)

    fuzz()
