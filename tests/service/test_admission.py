"""Admission's reader slots and their cap, its page places and its budget of bytes in flight."""

from __future__ import annotations

import pytest

from app.errors import TooManyPages
from app.service.admission import Admission
from app.service.observer import Observer


class Gauge(Observer):
    def __init__(self) -> None:
        self.readers: list[int] = []

    def live_readers(self, count: int) -> None:
        self.readers.append(count)


def test_slots_are_capped_know_their_tenant_and_are_given_back_once() -> None:
    gauge = Gauge()
    admission = Admission(gauge, max_readers=2)
    first, second = admission.take_slot("t1"), admission.take_slot("t2")
    assert first is not None
    assert second is not None
    assert (first.tenant, second.tenant) == ("t1", "t2")
    assert not admission.has_room("t1")
    assert admission.take_slot("t1") is None
    first.release()
    first.release()  # idempotent: one place back, not two
    assert admission.readers == 1
    assert admission.has_room("t3")
    assert gauge.readers == [1, 2, 1]


def test_page_places_are_capped_and_given_back_once() -> None:
    admission = Admission(Observer(), max_readers=1, max_pages=2)
    first = admission.page_place()
    admission.page_place()
    with pytest.raises(TooManyPages):
        admission.page_place()
    first()
    first()  # idempotent: one place back, not two
    admission.page_place()
    with pytest.raises(TooManyPages):
        admission.page_place()


def test_page_bytes_are_refused_past_the_budget_unless_nothing_is_held() -> None:
    admission = Admission(Observer(), max_readers=1, max_bytes_in_flight=100)
    give = admission.page_bytes(60)
    with pytest.raises(TooManyPages):
        admission.page_bytes(60)
    give()
    give()  # idempotent: 60 bytes back, not 120
    alone = admission.page_bytes(500)  # over the budget, but nothing else is held
    with pytest.raises(TooManyPages):
        admission.page_bytes(1)
    alone()
    admission.page_bytes(100)
