"""A stored generation as the domain's rules see it: each view's fields are read from the
record by name, so a field the domain adds and the record lacks fails here, not in a resume."""

from __future__ import annotations

from app.domain.append import GenerationState
from app.domain.decision import GenerationFacts
from tests.storage.fakes import NOW
from tests.storage.fakes import generation_record as _record


def test_the_append_rules_see_the_counters_and_marks() -> None:
    assert _record().state() == GenerationState(
        head_seq=4, tail_seq=9, current=True, terminal=True, terminal_seq=9, expired=False
    )
    fenced = _record(superseded_at=NOW, expired_at=NOW, terminal=False, terminal_seq=None)
    assert fenced.state() == GenerationState(
        head_seq=4, tail_seq=9, current=False, terminal=False, terminal_seq=None, expired=True
    )


def test_the_decision_sees_the_state_and_which_generation_it_is() -> None:
    assert _record().facts() == GenerationFacts(
        token="tok",
        stream_id="s",
        head_seq=4,
        tail_seq=9,
        current=True,
        terminal=True,
        terminal_seq=9,
        expired=False,
        contiguous=True,
    )
    holed = _record(retained_events=5)  # one event missing between head and tail
    assert holed.facts().contiguous is False
