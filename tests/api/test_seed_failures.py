"""The seed document's failures, end to end on both databases: nothing is ever spliced."""

from __future__ import annotations

import httpx
import pytest

from tests.support.writer_calls import append, datas, open_generation, resume, seqs


@pytest.mark.parametrize("reason", ["failover", "retry"])
async def test_a_restarted_counter_is_reset_never_spliced(
    client: httpx.AsyncClient, reason: str
) -> None:
    stream = "sess-1.req-7"
    a = (await open_generation(client, stream, producer="worker-A"))["generation"]
    await append(client, a, [f"A{i}" for i in range(1, 48)])
    b = await open_generation(client, stream, reason=reason, producer="worker-B")
    assert b["supersedes"] == a
    assert b["reason"] == reason
    assert b["epoch"] == 2
    await append(client, b["generation"], [f"B{i}" for i in range(1, 13)])

    for answer in (
        await resume(client, f"{a}:47", stream),
        await resume(client, f"{a}:47"),
    ):
        assert (answer["verdict"], answer["reason"]) == ("reset", "superseded")
        assert answer["discard_client_state"] is True
        assert answer["generation"] == b["generation"]
        assert datas(answer["events"]) == [f"B{i}" for i in range(1, 13)]
        assert seqs(answer["events"]) == list(range(1, 13))
        assert answer["events"][0]["id"] == f"{b['generation']}:1"
        assert answer["stream_id"] == stream


async def test_the_stale_producer_is_fenced(client: httpx.AsyncClient) -> None:
    a = (await open_generation(client, "s"))["generation"]
    await append(client, a, ["A1"])
    await open_generation(client, "s", reason="failover")
    refused = await append(client, a, ["A2"], expect=409)
    assert refused["code"] == "superseded"
    page = await client.get(f"/v1/generations/{a}/events")
    assert datas(page.json()["events"]) == ["A1"]


async def test_a_bare_integer_id_is_invalid(client: httpx.AsyncClient) -> None:
    token = (await open_generation(client, "s"))["generation"]
    await append(client, token, ["x"] * 50)
    answer = await resume(client, "47", "s")
    assert (answer["verdict"], answer["reason"]) == ("invalid", "malformed_id")
    assert answer["events"] == []
    assert answer["generation"] is None
    assert answer["discard_client_state"] is False


async def test_every_row_end_to_end(client: httpx.AsyncClient) -> None:
    live = (await open_generation(client, "s", max_events=5))["generation"]
    await append(client, live, [str(i) for i in range(1, 11)])  # keeps 6..10
    other = (await open_generation(client, "t"))["generation"]
    await append(client, other, ["t1"])
    done = (await open_generation(client, "u"))["generation"]
    await append(client, done, ["u1", "u2"], terminal=True)

    cases = {
        f"{live}:x": ("invalid", "malformed_id"),
        "UnknownUnknownUnknown1:1": ("invalid", "unknown_generation"),
        f"{other}:1": ("invalid", "cross_stream"),
        f"{live}:11": ("invalid", "beyond_tail"),
        f"{live}:4": ("reset", "evicted"),
        f"{live}:0": ("reset", "evicted"),
        f"{live}:5": ("resume", "ok"),
        f"{live}:10": ("resume", "ok"),
    }
    for claim, expected in cases.items():
        answer = await resume(client, claim, "s")
        assert (answer["verdict"], answer["reason"]) == expected, claim
    terminal = await resume(client, f"{done}:1", "u")
    assert (terminal["verdict"], terminal["reason"]) == ("reset", "terminal")
    assert terminal["generation"] is None
    assert terminal["events"] == []

    resumed = await resume(client, f"{live}:5", "s")
    assert seqs(resumed["events"]) == [6, 7, 8, 9, 10]
    assert resumed["generation"] == live
    assert resumed["discard_client_state"] is False
    assert (resumed["head_seq"], resumed["tail_seq"]) == (6, 10)
    evicted = await resume(client, f"{live}:4", "s")
    assert evicted["generation"] is None
    assert evicted["discard_client_state"] is True


async def test_seq_zero_of_a_fresh_generation_resumes_from_the_start(
    client: httpx.AsyncClient,
) -> None:
    token = (await open_generation(client, "s"))["generation"]
    assert (await resume(client, f"{token}:0", "s"))["events"] == []
    await append(client, token, ["a", "b"])
    answer = await resume(client, f"{token}:0", "s")
    assert (answer["verdict"], datas(answer["events"])) == ("resume", ["a", "b"])
