"""What writers were told (acknowledged) versus what the database holds.

A writer records every batch it sent: acknowledged (a 2xx came back) or in doubt (the
connection died first). `check_generation` then proves the stored state against it:
every acknowledged event present with its seq and content, an in-doubt batch stored
whole or not at all, seqs contiguous from head to tail, and the generation's counters
(head, tail, retained events and bytes, terminal) agreeing with the events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.storage.schema import events, generations


@dataclass
class Batch:
    """One append as sent: `data[i]` is the event at `first_seq + i`."""

    first_seq: int
    data: list[str]
    terminal: bool = False

    @property
    def seqs(self) -> range:
        """The seqs the batch occupies."""
        return range(self.first_seq, self.first_seq + len(self.data))


@dataclass
class GenerationLedger:
    """A writer's record of one generation it opened."""

    token: str
    epoch: int
    max_events: int
    acked: dict[int, str] = field(default_factory=dict)
    in_doubt: Batch | None = None
    terminal_seq: int | None = None

    @property
    def next_seq(self) -> int:
        """The seq the writer's next batch starts at."""
        return max(self.acked, default=0) + 1

    def acknowledge(self, batch: Batch) -> None:
        """The service answered 2xx for this batch: it must be stored."""
        self.acked.update(zip(batch.seqs, batch.data, strict=True))
        if batch.terminal:
            self.terminal_seq = batch.seqs[-1] if batch.data else max(self.acked, default=0)
        self.in_doubt = None


@dataclass(frozen=True)
class StoredGeneration:
    """A generation's row and its events, read in one transaction."""

    head_seq: int
    tail_seq: int
    retained_events: int
    retained_bytes: int
    terminal: bool
    terminal_seq: int | None
    superseded: bool
    events: dict[int, tuple[str, int]]  # seq -> (data, nbytes)


async def read_generation(conn: AsyncConnection, token: str) -> StoredGeneration | None:
    """The stored state of the generation with that token, or None."""
    row = (await conn.execute(select(generations).where(generations.c.token == token))).first()
    if row is None:
        return None
    stored = await conn.execute(
        select(events.c.seq, events.c.data, events.c.nbytes).where(events.c.generation_pk == row.id)
    )
    return StoredGeneration(
        head_seq=row.head_seq,
        tail_seq=row.tail_seq,
        retained_events=row.retained_events,
        retained_bytes=row.retained_bytes,
        terminal=row.terminal,
        terminal_seq=row.terminal_seq,
        superseded=row.superseded_at is not None,
        events={e.seq: (e.data, e.nbytes) for e in stored},
    )


async def read_generations(url: str, tokens: Iterable[str]) -> dict[str, StoredGeneration | None]:
    """`read_generation` of each token, on one connection to the database at `url`."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return {token: await read_generation(conn, token) for token in tokens}
    finally:
        await engine.dispose()


def check_generation(ledger: GenerationLedger, stored: StoredGeneration) -> list[str]:
    """Every way the stored generation contradicts what its writer was told (empty: none)."""
    problems: list[str] = []
    tag = f"generation {ledger.token} (epoch {ledger.epoch})"
    seqs = sorted(stored.events)
    if seqs != list(range(stored.head_seq, stored.tail_seq + 1)):
        problems.append(f"{tag}: seqs {seqs[:5]}… are not head..tail {stored.head_seq}..")
    if stored.retained_events != len(seqs):
        problems.append(f"{tag}: retained_events {stored.retained_events} != {len(seqs)} rows")
    nbytes = sum(len(data.encode()) for data, _ in stored.events.values())
    if stored.retained_bytes != nbytes or nbytes != sum(n for _, n in stored.events.values()):
        problems.append(f"{tag}: retained_bytes {stored.retained_bytes} != {nbytes}")
    expected_head = max(1, stored.tail_seq - ledger.max_events + 1)
    if stored.head_seq != expected_head:
        problems.append(f"{tag}: head {stored.head_seq}, expected {expected_head} (max_events)")
    acked_tail = max(ledger.acked, default=0)
    if stored.tail_seq < acked_tail:
        problems.append(f"{tag}: tail {stored.tail_seq} lost acknowledged seq {acked_tail}")
    for seq, data in ledger.acked.items():
        if seq >= stored.head_seq and stored.events.get(seq, (None,))[0] != data:
            problems.append(f"{tag}: acknowledged seq {seq} missing or changed")
    problems += _check_unacknowledged(ledger, stored, tag, acked_tail)
    problems += _check_terminal(ledger, stored, tag)
    return problems


def _check_unacknowledged(
    ledger: GenerationLedger, stored: StoredGeneration, tag: str, acked_tail: int
) -> list[str]:
    """Anything stored past the acknowledged tail must be the whole in-doubt batch."""
    extra = list(range(acked_tail + 1, stored.tail_seq + 1))
    if not extra:
        return []
    batch = ledger.in_doubt
    if batch is None or extra != list(batch.seqs):
        return [f"{tag}: seqs {extra} stored but never sent as one batch (partial batch?)"]
    for seq, data in zip(batch.seqs, batch.data, strict=True):
        if seq >= stored.head_seq and stored.events.get(seq, (None,))[0] != data:
            return [f"{tag}: in-doubt batch stored with other content at seq {seq}"]
    return []


def _check_terminal(ledger: GenerationLedger, stored: StoredGeneration, tag: str) -> list[str]:
    if ledger.terminal_seq is not None:
        if not stored.terminal or stored.terminal_seq != ledger.terminal_seq:
            return [f"{tag}: acknowledged terminal at {ledger.terminal_seq} not stored"]
        return []
    if stored.terminal:
        batch = ledger.in_doubt
        last = stored.tail_seq
        if batch is None or not batch.terminal or stored.terminal_seq != last:
            return [f"{tag}: terminal at {stored.terminal_seq} without a terminal batch"]
    elif stored.terminal_seq is not None:
        return [f"{tag}: terminal_seq {stored.terminal_seq} set on a live generation"]
    return []
