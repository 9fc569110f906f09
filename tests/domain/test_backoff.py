from __future__ import annotations

from itertools import islice

import pytest

from app.domain.backoff import Backoff


@pytest.mark.parametrize(
    ("backoff", "pauses"),
    [
        (Backoff(first=0.25, most=2.0), [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]),
        (Backoff(first=0.1, most=1.0, factor=1.5), [0.1, 0.15, 0.225, 0.3375, 0.50625, 0.759375]),
        (Backoff(first=1.0, most=1.0), [1.0] * 6),
        (Backoff(first=3.0, most=5.0, factor=1), [3.0] * 6),
        (Backoff(first=60.0, most=30.0), [60.0, 30.0, 30.0, 30.0, 30.0, 30.0]),
    ],
)
def test_pauses_grow_by_the_factor_up_to_the_most(backoff: Backoff, pauses: list[float]) -> None:
    assert list(islice(backoff.pauses(), 6)) == pytest.approx(pauses)


def test_each_loop_starts_again_from_the_first_pause() -> None:
    backoff = Backoff(first=0.5, most=4.0)
    first = backoff.pauses()
    assert [next(first) for _ in range(3)] == [0.5, 1.0, 2.0]
    assert next(backoff.pauses()) == 0.5


@pytest.mark.parametrize(
    ("first", "most", "factor"),
    [(0.0, 1.0, 2.0), (-1.0, 1.0, 2.0), (0.1, 0.0, 2.0), (0.1, 1.0, 0.5)],
)
def test_a_backoff_that_would_not_wait_or_would_shrink_is_refused(
    first: float, most: float, factor: float
) -> None:
    with pytest.raises(ValueError, match="not a backoff"):
        Backoff(first=first, most=most, factor=factor)
