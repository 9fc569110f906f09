"""Page refusals: beyond the tail, evicted, expired."""

from __future__ import annotations

import pytest

from app.domain.paging import PageRefusal, check_page


@pytest.mark.parametrize(
    ("after", "head", "tail", "expired", "refusal"),
    [
        (0, 1, 5, False, None),
        (5, 1, 5, False, None),
        (2, 3, 5, False, None),
        (6, 1, 5, False, PageRefusal.BEYOND_TAIL),
        (1, 3, 5, False, PageRefusal.EVICTED),
        (2, 3, 5, True, PageRefusal.EXPIRED),
    ],
)
def test_pages(
    after: int, head: int, tail: int, expired: bool, refusal: PageRefusal | None
) -> None:
    assert check_page(after=after, head_seq=head, tail_seq=tail, expired=expired) is refusal
