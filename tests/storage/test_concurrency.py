"""Races, on both databases: the database's locks keep the log contiguous and fenced."""

from __future__ import annotations

import asyncio
import random

import httpx

from tests.support.writer_calls import append, open_generation, resume, seqs

WRITERS = 12
BATCHES = 8


async def test_racing_appenders_get_unique_contiguous_seqs(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "race", max_events=100_000))["generation"]

    async def writer(w: int) -> list[list[int]]:
        batches = []
        for b in range(BATCHES):
            size = 1 + (w + b) % 4
            answer = await append(client, token, [f"w{w}b{b}e{i}" for i in range(size)])
            batches.append([int(i.rsplit(":", 1)[1]) for i in answer["event_ids"]])
        return batches

    results = await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    every = sorted(seq for batches in results for batch in batches for seq in batch)
    assert every == list(range(1, len(every) + 1))
    for batches in results:
        for batch in batches:
            assert batch == list(range(batch[0], batch[0] + len(batch)))

    page = (await client.get(f"/v1/generations/{token}/events?limit=5000")).json()
    assert seqs(page["events"]) == every
    # each batch's events are stored in the batch's order, at the batch's seqs
    by_seq = {e["seq"]: e["data"] for e in page["events"]}
    for w, batches in enumerate(results):
        for b, batch in enumerate(batches):
            assert [by_seq[s] for s in batch] == [f"w{w}b{b}e{i}" for i in range(len(batch))]


async def test_racing_opens_leave_one_current_generation(client: httpx.AsyncClient) -> None:
    opened = await asyncio.gather(*(open_generation(client, "contended") for _ in range(16)))
    epochs = sorted(g["epoch"] for g in opened)
    assert epochs == list(range(1, 17))
    stream = (await client.get("/v1/streams/contended")).json()
    current = stream["current"]
    assert current["epoch"] == 16
    assert stream["generations"] == 16
    # exactly one generation still accepts appends; every other one is fenced
    outcomes = await asyncio.gather(
        *(
            client.post(
                f"/v1/generations/{g['generation']}/events", json={"events": [{"data": "x"}]}
            )
            for g in opened
        )
    )
    accepted = [g for g, r in zip(opened, outcomes, strict=True) if r.status_code == 201]
    assert [g["generation"] for g in accepted] == [current["generation"]]
    assert {r.json()["code"] for r in outcomes if r.status_code != 201} == {"superseded"}
    # the supersedes links form one chain through every epoch
    by_epoch = {g["epoch"]: g for g in opened}
    for epoch in range(2, 17):
        assert by_epoch[epoch]["supersedes"] == by_epoch[epoch - 1]["generation"]


async def test_resumes_racing_appends_and_evictions_never_see_a_hole(
    client: httpx.AsyncClient,
) -> None:
    token = (await open_generation(client, "churn", max_events=20))["generation"]
    await append(client, token, [str(i) for i in range(1, 21)])
    stop = asyncio.Event()
    rng = random.Random(7)
    checked = {"resume": 0, "reset": 0}

    async def producer() -> None:
        for _ in range(60):
            await append(client, token, ["p"] * 7)
        stop.set()

    async def reader() -> None:
        while not stop.is_set():
            tail = (await client.get("/v1/streams/churn")).json()["current"]["tail_seq"]
            claim = max(0, tail - rng.randint(0, 30))
            answer = await resume(client, f"{token}:{claim}", "churn")
            checked[answer["verdict"]] += 1
            if answer["verdict"] == "resume":
                got = seqs(answer["events"])
                assert got == list(range(claim + 1, claim + 1 + len(got)))
                assert got[-1] == answer["tail_seq"] if got else claim == answer["tail_seq"]
            else:
                assert answer["reason"] == "evicted"
                assert answer["events"] == []

    await asyncio.gather(producer(), reader(), reader(), reader())
    assert checked["resume"] > 0
    assert checked["reset"] > 0
