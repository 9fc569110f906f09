"""A small reference model of the contract, written from CONTRACT.md and the README alone.

It deliberately shares no code with `app/` (not `app.domain.decision`, not the id parser):
if the service and this model disagree, one of them misreads the contract.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_ID = re.compile(r"[A-Za-z0-9_-]+:[0-9]+", re.ASCII)
MAX_ID_LENGTH = 300

Event = tuple[str | None, str]  # (SSE event type, data)


@dataclass
class ModelGeneration:
    """One generation: every event ever appended (seq = index + 1) and what is retained."""

    token: str
    stream: str
    epoch: int
    max_events: int
    events: list[Event] = field(default_factory=list)
    head: int = 1
    terminal_seq: int | None = None
    current: bool = True

    @property
    def tail(self) -> int:
        """The newest seq ever appended (0 before the first)."""
        return len(self.events)

    @property
    def terminal(self) -> bool:
        """Whether the generation is finished."""
        return self.terminal_seq is not None

    def event_json(self, seq: int) -> dict[str, Any]:
        """The event at `seq` as the API shows it."""
        kind, data = self.events[seq - 1]
        return {
            "id": f"{self.token}:{seq}",
            "seq": seq,
            "event": kind,
            "data": data,
            "terminal": self.terminal_seq == seq,
        }

    def page(self, after: int, limit: int) -> tuple[list[dict[str, Any]], int | None]:
        """Events after `after` (at most `limit`), and where the next page starts."""
        through = min(self.tail, after + limit)
        events = [self.event_json(seq) for seq in range(after + 1, through + 1)]
        return events, (through if through < self.tail else None)


@dataclass(frozen=True)
class Outcome:
    """What the model expects an HTTP call to answer."""

    status: int
    code: str | None = None
    body: dict[str, Any] | None = None


class ReferenceLog:
    """Streams and generations as the contract describes them."""

    def __init__(
        self, *, max_batch: int, max_event_bytes: int, default_max_events: int, replay: bool
    ) -> None:
        self.max_batch = max_batch
        self.max_event_bytes = max_event_bytes
        self.default_max_events = default_max_events
        self.replay = replay
        self.streams: dict[str, list[ModelGeneration]] = {}
        self.generations: dict[str, ModelGeneration] = {}

    def open(self, stream: str, token: str, max_events: int | None) -> ModelGeneration:
        """Record a generation the service opened; the previous current one is superseded."""
        history = self.streams.setdefault(stream, [])
        if history:
            history[-1].current = False
        gen = ModelGeneration(
            token, stream, len(history) + 1, max_events or self.default_max_events
        )
        history.append(gen)
        self.generations[token] = gen
        return gen

    def append(
        self, token: str, batch: list[Event], first_seq: int | None, terminal: bool
    ) -> Outcome:
        """The contract's append rules; the model changes only when the service stores."""
        if not batch and not terminal:
            return Outcome(422, "validation_error")
        if len(batch) > self.max_batch:
            return Outcome(413, "batch_too_large")
        if any(len(data.encode()) > self.max_event_bytes for _, data in batch):
            return Outcome(413, "event_too_large")
        gen = self.generations.get(token)
        if gen is None:
            return Outcome(404, "unknown_generation")
        if first_seq is not None and first_seq <= gen.tail:
            return self._retry(gen, batch, first_seq, terminal)
        if terminal and not batch and gen.terminal_seq == gen.tail and first_seq == gen.tail + 1:
            return self._answer(gen, range(gen.tail + 1, gen.tail + 1), duplicate=True)
        if not gen.current:
            return Outcome(409, "superseded")
        if gen.terminal:
            return Outcome(409, "terminal")
        if first_seq is not None and first_seq != gen.tail + 1:
            return Outcome(409, "seq_gap")
        first = gen.tail + 1
        gen.events.extend(batch)
        gen.head = max(gen.head, gen.tail - gen.max_events + 1)
        if terminal:
            gen.terminal_seq = gen.tail
        return self._answer(gen, range(first, gen.tail + 1), duplicate=False)

    def _retry(
        self, gen: ModelGeneration, batch: list[Event], first_seq: int, terminal: bool
    ) -> Outcome:
        last = first_seq + len(batch) - 1
        if not batch or last > gen.tail or first_seq < gen.head:
            return Outcome(409, "seq_conflict")
        if gen.events[first_seq - 1 : last] != batch:
            return Outcome(409, "seq_conflict")
        if terminal and gen.terminal_seq != last:
            return Outcome(409, "seq_conflict")
        return self._answer(gen, range(first_seq, last + 1), duplicate=True)

    def _answer(self, gen: ModelGeneration, seqs: range, *, duplicate: bool) -> Outcome:
        body = {
            "generation": gen.token,
            "event_ids": [f"{gen.token}:{seq}" for seq in seqs],
            "head_seq": gen.head,
            "tail_seq": gen.tail,
            "terminal": gen.terminal,
            "duplicate": duplicate,
        }
        return Outcome(200 if duplicate else 201, None, body)

    def resume(self, last_event_id: str, asked: str | None, limit: int) -> dict[str, Any]:
        """The decision table, rows in order, first match wins; and what it delivers."""
        if len(last_event_id) > MAX_ID_LENGTH or not _ID.fullmatch(last_event_id):
            return self._verdict("invalid", "malformed_id", last_event_id, asked)
        token, _, digits = last_event_id.partition(":")
        seq = int(digits)
        gen = self.generations.get(token)
        if gen is None:
            return self._verdict("invalid", "unknown_generation", last_event_id, asked)
        stream = asked if asked is not None else gen.stream
        if gen.stream != stream:
            return self._verdict("invalid", "cross_stream", last_event_id, stream)
        if seq > gen.tail:
            return self._verdict("invalid", "beyond_tail", last_event_id, stream)
        if not gen.current:
            fresh = self.streams[gen.stream][-1]
            deliver = fresh if fresh.head == 1 else None
            return self._verdict("reset", "superseded", last_event_id, stream, deliver, 0, limit)
        if gen.terminal and (not self.replay or seq >= gen.tail):
            return self._verdict("reset", "terminal", last_event_id, stream)
        if seq < gen.head - 1:
            return self._verdict("reset", "evicted", last_event_id, stream)
        return self._verdict("resume", "ok", last_event_id, stream, gen, seq, limit)

    def _verdict(
        self,
        verdict: str,
        reason: str,
        last_event_id: str,
        stream: str | None,
        gen: ModelGeneration | None = None,
        after: int = 0,
        limit: int = 0,
    ) -> dict[str, Any]:
        events, next_after = gen.page(after, limit) if gen is not None else ([], None)
        return {
            "verdict": verdict,
            "reason": reason,
            "stream_id": stream,
            "last_event_id": last_event_id,
            "generation": None if gen is None else gen.token,
            "discard_client_state": verdict == "reset",
            "events": events,
            "next_after": next_after,
            "terminal": False if gen is None else gen.terminal,
            "head_seq": None if gen is None else gen.head,
            "tail_seq": None if gen is None else gen.tail,
        }

    def page(self, token: str, after: int, limit: int) -> Outcome:
        """`GET /v1/generations/{token}/events?after=&limit=`."""
        gen = self.generations.get(token)
        if gen is None:
            return Outcome(404, "unknown_generation")
        if after > gen.tail:
            return Outcome(409, "beyond_tail")
        if after < gen.head - 1:
            return Outcome(410, "evicted")
        events, next_after = gen.page(after, limit)
        body = {
            "generation": token,
            "events": events,
            "next_after": next_after,
            "head_seq": gen.head,
            "tail_seq": gen.tail,
            "terminal": gen.terminal,
            "superseded": not gen.current,
            # A run of the model is far shorter than a writer lease (30 s by default), and
            # every append renews it: nothing the model writes is ever abandoned.
            "abandoned": False,
        }
        return Outcome(200, None, body)
