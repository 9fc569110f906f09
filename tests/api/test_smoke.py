import httpx


async def test_open_append_resume(client: httpx.AsyncClient) -> None:
    opened = await client.post("/v1/streams/s1/generations")
    assert opened.status_code == 201, opened.text
    token = opened.json()["generation"]
    appended = await client.post(
        f"/v1/generations/{token}/events", json={"events": [{"data": "a"}, {"data": "b"}]}
    )
    assert appended.status_code == 201, appended.text
    resumed = await client.post("/v1/streams/s1/resume", json={"last_event_id": f"{token}:1"})
    body = resumed.json()
    assert body["verdict"] == "resume"
    assert [e["data"] for e in body["events"]] == ["b"]
