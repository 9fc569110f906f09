"""What the use cases report are immutable values: equal when their facts are, never edited
by an observer, and a retention pass that did not run reports nothing done."""

from __future__ import annotations

import dataclasses

import pytest

from app.domain.decision import Reason, ScopeReason, Verdict
from app.domain.outcomes import BatchAcknowledged, Decided, RetentionPass


def test_facts_are_values_an_observer_cannot_edit() -> None:
    decided = Decided("t", "s", "tok:1", Verdict.RESET, Reason.SUPERSEDED, "new", 0)
    assert decided == Decided("t", "s", "tok:1", Verdict.RESET, Reason.SUPERSEDED, "new", 0)
    assert len({decided, dataclasses.replace(decided)}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        decided.delivered = 5  # type: ignore[misc]
    refused = dataclasses.replace(decided, reason=ScopeReason.CROSS_SESSION, generation=None)
    assert refused.reason is ScopeReason.CROSS_SESSION
    assert BatchAcknowledged(3, False, 1) != BatchAcknowledged(3, True, 1)


def test_a_pass_that_did_not_run_did_nothing() -> None:
    skipped = RetentionPass(ran=False)
    counts = [getattr(skipped, f.name) for f in dataclasses.fields(skipped) if f.name != "ran"]
    assert counts == [0] * 6
