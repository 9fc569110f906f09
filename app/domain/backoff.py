"""Pauses that grow between tries of something that may take a while to come back.

Every loop of the service that retries (a background task restarting, the database
listener reconnecting, a task worker settling or waiting for input, the gateway fencing a
spoiled generation) takes its pauses from one `Backoff`: the first pause, the factor each
next one grows by, and the most any pause may be.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """A first pause of `first` seconds, each next one `factor` times the last but never
    over `most`."""

    first: float
    most: float
    factor: float = 2.0

    def __post_init__(self) -> None:
        if self.first <= 0 or self.most <= 0 or self.factor < 1:
            raise ValueError(f"not a backoff: {self!r}")

    def pauses(self) -> Iterator[float]:
        """The pauses, one per try, for as many tries as the caller makes."""
        pause = self.first
        while True:
            yield pause
            pause = min(pause * self.factor, self.most)
