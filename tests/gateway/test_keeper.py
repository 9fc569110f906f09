"""The lease keeper (`app/gateway/keeper.py`): every recording's lease renewed in one write,
a refusal (finished or fenced meanwhile) counted out, and the rounds going on until stopped
whatever one of them meets."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from app.domain.append import AppendConflict
from app.errors import ConflictingBatch, StorageUnavailable
from app.gateway.keeper import LeaseKeeper


class Leases:
    """Renews what it is asked to, refuses `fenced`; its first round fails when `down`."""

    def __init__(self, *, down: bool = False) -> None:
        self.rounds: list[tuple[str, list[str]]] = []
        self.down = down
        self.renewed = asyncio.Event()

    async def renew_many(self, tenant: str, tokens: Sequence[str]) -> list[object]:
        self.rounds.append((tenant, list(tokens)))
        if self.down:
            self.down = False
            raise StorageUnavailable("the database is away")
        self.renewed.set()
        return [
            ConflictingBatch(AppendConflict.SUPERSEDED, "fenced") if t == "fenced" else object()
            for t in tokens
        ]


async def test_one_write_renews_every_token_and_refusals_are_not_counted() -> None:
    leases = Leases()
    keeper = LeaseKeeper(leases, "t", 10.0, lambda: ["b", "fenced", "a", "b"])  # type: ignore[arg-type]
    assert await keeper.renew_now() == 2
    assert leases.rounds == [("t", ["a", "b", "fenced"])]


async def test_nothing_to_renew_writes_nothing() -> None:
    leases = Leases()
    keeper = LeaseKeeper(leases, "t", 10.0, list)  # type: ignore[arg-type]
    assert await keeper.renew_now() == 0
    assert leases.rounds == []


async def test_the_rounds_go_on_after_a_failed_one_until_stopped() -> None:
    leases = Leases(down=True)
    keeper = LeaseKeeper(leases, "t", 0.01, lambda: ["a"])  # type: ignore[arg-type]
    keeper.ensure_running()
    keeper.ensure_running()  # idempotent: one task
    await asyncio.wait_for(leases.renewed.wait(), timeout=10)
    await keeper.stop()
    rounds = len(leases.rounds)
    assert rounds >= 2
    await asyncio.sleep(0.05)  # stopped: no round comes after
    assert len(leases.rounds) == rounds
