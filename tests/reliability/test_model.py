"""Model-based test: random API programs against a reference model of the contract.

A hypothesis `RuleBasedStateMachine` opens generations (small `max_events`, so eviction
happens), appends (with and without `first_seq`, exact and altered retries, gaps,
oversized events and batches, terminal batches, unknown tokens), pages, and resumes with
valid, stale, evicted, future, foreign, unknown and garbage ids on both resume routes.
Every status, problem `code`, verdict, reason and delivered event must equal what
`reference.ReferenceLog` — written from the contract, sharing no code with `app/` —
predicts. Runs on SQLite and PostgreSQL, under both terminal policies.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from app.domain.decision import TerminalPolicy
from tests.support.app import make_settings
from tests.support.driver import AppDriver
from tests.support.reference import Event, ModelGeneration, Outcome, ReferenceLog
from tests.support.soak import soak_enabled

MAX_BATCH, MAX_EVENT_BYTES, DEFAULT_MAX_EVENTS = 4, 48, 10_000

texts = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=6)
event_types = st.sampled_from([None, "message", "progress", "é"])
batches = st.lists(st.tuples(event_types, texts), max_size=3)
sizes = st.sampled_from(["fits"] * 8 + ["event_too_large", "batch_too_large"])
garbage_ids = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        ["", ":", ":1", "t:", "t:-1", "t:1.5", "t: 1", "t:1\n", "t\r:1", "t:\u0661", "a/b:1"]
    ),
    st.just("a" * 299 + ":1"),
)
nearby = st.integers(min_value=-2, max_value=3)
behind = st.integers(min_value=-5, max_value=1)  # a claimed seq relative to the tail


def unknown_token() -> str:
    """A well-formed token the service never issued."""
    return secrets.token_urlsafe(16)


class EventLogMachine(RuleBasedStateMachine):
    """Random programs over the writer API, each answer checked against the model."""

    seen: ClassVar[Counter[str]] = Counter()  # what the runs exercised, across examples

    def __init__(self, driver: AppDriver, replay: bool) -> None:
        super().__init__()
        self.driver = driver
        self.prefix = f"m{secrets.token_hex(5)}"  # examples share the database, not streams
        self.model = ReferenceLog(
            max_batch=MAX_BATCH,
            max_event_bytes=MAX_EVENT_BYTES,
            default_max_events=DEFAULT_MAX_EVENTS,
            replay=replay,
        )

    def call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return self.driver.request(method, url, **kwargs)

    def pick(self, index: int) -> ModelGeneration:
        tokens = list(self.model.generations)
        return self.model.generations[tokens[index % len(tokens)]]

    def expect(self, answer: httpx.Response, outcome: Outcome) -> None:
        self.seen[f"{outcome.status} {outcome.code or 'ok'}"] += 1
        assert answer.status_code == outcome.status, (outcome, answer.text)
        if outcome.code is not None:
            assert answer.headers["content-type"].startswith("application/problem+json")
            assert answer.json()["code"] == outcome.code, answer.text
        if outcome.body is not None:
            assert answer.json() == outcome.body

    @initialize(name=st.sampled_from("abc"), max_events=st.sampled_from([None, 2, 3]))
    def first_generation(self, name: str, max_events: int | None) -> None:
        self.open_generation(name, max_events, None)

    @rule(
        name=st.sampled_from("abc"),
        max_events=st.sampled_from([None, 1, 2, 3, 5]),
        reason=st.sampled_from([None, "failover", "retry"]),
    )
    def open_generation(self, name: str, max_events: int | None, reason: str | None) -> None:
        stream = f"{self.prefix}.{name}"
        previous = self.model.streams.get(stream, [])
        body = {k: v for k, v in {"max_events": max_events, "reason": reason}.items() if v}
        answer = self.call("POST", f"/v1/streams/{stream}/generations", json=body)
        assert answer.status_code == 201, answer.text
        opened = answer.json()
        gen = self.model.open(stream, opened["generation"], max_events)
        default_reason = "initial" if gen.epoch == 1 else "reset"
        assert opened["epoch"] == gen.epoch
        assert opened["reason"] == (reason or default_reason)
        assert opened["supersedes"] == (previous[-2].token if len(previous) > 1 else None)
        assert (opened["head_seq"], opened["tail_seq"], opened["terminal"]) == (1, 0, False)

    @precondition(lambda self: self.model.generations)
    @rule(
        index=st.integers(min_value=0),
        batch=batches,
        mode=st.sampled_from(["none", "next", "retry", "altered", "gap", "near", "unknown"]),
        offset=nearby,
        terminal=st.sampled_from([False] * 6 + [True]),
        size=sizes,
    )
    def append(
        self,
        index: int,
        batch: list[Event],
        mode: str,
        offset: int,
        terminal: bool,
        size: str,
        target: ModelGeneration | None = None,
    ) -> None:
        gen = target or self.pick(index)
        token = unknown_token() if mode == "unknown" else gen.token
        first_seq: int | None = None
        if mode in ("retry", "altered") and gen.tail > 0:
            first_seq = max(1, gen.tail - abs(offset))
            batch = list(gen.events[first_seq - 1 : first_seq - 1 + max(1, len(batch))])
            if mode == "altered":
                batch[-1] = (batch[-1][0], batch[-1][1] + "~")
        elif mode == "next":
            first_seq = gen.tail + 1
        elif mode == "gap":
            first_seq = gen.tail + 2 + abs(offset)
        elif mode == "near":
            first_seq = max(1, gen.tail + offset)
        if size == "event_too_large":
            batch = [*batch, ("message", "x" * (MAX_EVENT_BYTES + 1))]
        elif size == "batch_too_large":
            batch = [("message", str(i)) for i in range(MAX_BATCH + 1)]
        expected = self.model.append(token, batch, first_seq, terminal)
        body: dict[str, Any] = {"events": [{"event": e, "data": d} for e, d in batch]}
        if first_seq is not None:
            body["first_seq"] = first_seq
        if terminal:
            body["terminal"] = True
        self.expect(self.call("POST", f"/v1/generations/{token}/events", json=body), expected)

    @precondition(lambda self: self.model.generations)
    @rule(
        index=st.integers(min_value=0),
        batch=batches.filter(bool),
        numbered=st.booleans(),
        terminal=st.sampled_from([False] * 12 + [True]),
    )
    def grow(self, index: int, batch: list[Event], numbered: bool, terminal: bool) -> None:
        """The common case: the current producer appends at its tail (so evictions happen)."""
        gen = self.pick(index)
        current = self.model.streams[gen.stream][-1]
        if current.terminal:  # a finished tool call: the producer's next call opens anew
            self.open_generation(current.stream.rsplit(".", 1)[1], current.max_events, "retry")
            return
        self.append(index, batch, "next" if numbered else "none", 0, terminal, "fits", current)

    @precondition(lambda self: self.model.generations)
    @rule(index=st.integers(min_value=0), offset=nearby, limit=st.sampled_from([None, 1, 2]))
    def page(self, index: int, offset: int, limit: int | None) -> None:
        gen = self.pick(index)
        after = max(0, gen.head - 1 + offset)
        params = {"after": after} | ({} if limit is None else {"limit": limit})
        answer = self.call("GET", f"/v1/generations/{gen.token}/events", params=params)
        self.expect(answer, self.model.page(gen.token, after, limit or 500))

    @rule(
        index=st.integers(min_value=0),
        kind=st.sampled_from(["known", "known", "known", "unknown", "garbage"]),
        seq=behind,
        garbage=garbage_ids,
        asked=st.sampled_from([None, "own", "a", "b", "c"]),
        limit=st.sampled_from([None, 1, 2]),
    )
    def resume(
        self, index: int, kind: str, seq: int, garbage: str, asked: str | None, limit: int | None
    ) -> None:
        if kind == "known" and self.model.generations:
            gen = self.pick(index)
            claim = f"{gen.token}:{max(0, gen.tail + seq)}"
            stream = gen.stream if asked == "own" else asked and f"{self.prefix}.{asked}"
        else:
            claim = f"{unknown_token()}:{seq + 5}" if kind == "unknown" else garbage
            stream = None if asked is None else f"{self.prefix}.{asked.replace('own', 'a')}"
        body: dict[str, Any] = {"last_event_id": claim} | (
            {} if limit is None else {"limit": limit}
        )
        url = "/v1/resume" if stream is None else f"/v1/streams/{stream}/resume"
        answer = self.call("POST", url, json=body)
        assert answer.status_code == 200, answer.text
        got = answer.json()
        got.pop("detail")
        self.seen[f"{got['verdict']} {got['reason']}"] += 1
        assert got == self.model.resume(claim, stream, limit or 500)


def _examples() -> tuple[int, int]:
    return (100, 50) if soak_enabled() else (15, 40)


@pytest.fixture
def driver_for(database_url: str) -> Iterator[Any]:
    """Build an `AppDriver` on the test's database with the model's limits and a policy."""
    drivers: list[AppDriver] = []

    def build(policy: TerminalPolicy) -> AppDriver:
        config = make_settings(
            database_url,
            max_batch_events=MAX_BATCH,
            max_event_bytes=MAX_EVENT_BYTES,
            default_max_events=DEFAULT_MAX_EVENTS,
            terminal_resume=policy,
        )
        drivers.append(AppDriver(config))
        return drivers[-1]

    yield build
    for driver in drivers:
        driver.close()


@pytest.mark.parametrize("policy", list(TerminalPolicy))
def test_api_matches_the_reference_model(driver_for: Any, policy: TerminalPolicy) -> None:
    """Every answer of random API programs equals the contract model's (both databases)."""
    driver = driver_for(policy)
    examples, steps = _examples()
    run_state_machine_as_test(
        lambda: EventLogMachine(driver, replay=policy is TerminalPolicy.REPLAY),
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    print(sorted(EventLogMachine.seen.items()))
