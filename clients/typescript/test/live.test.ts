/**
 * Following a stream live (`client.follow`): the SSE reader on its own, the real service's
 * live route (events, reset, end), and the hostile fake service (an endless line, malformed
 * frames, silence, HTML, a redirect), each of which ends the stream with a typed error.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  DeadlineExceeded,
  EventLogClient,
  type LiveEvent,
  MalformedResponse,
  Redirected,
  ResponseTooLarge,
  UnexpectedContentType,
} from "../src/index.js";
import { MalformedStream, readFrames, type SseFrame } from "../src/sse.js";
import { HostileService } from "./support/hostile.js";
import { type Service, startService } from "./support/service.js";
import { failure } from "./support/failure.js";

const LIMITS = { maxLineBytes: 64, maxFrameBytes: 64 };

async function frames(chunks: string[], limits = LIMITS): Promise<SseFrame[]> {
  const encoder = new TextEncoder();
  async function* body(): AsyncGenerator<Uint8Array> {
    for (const chunk of chunks) yield encoder.encode(chunk);
  }
  const out: SseFrame[] = [];
  for await (const frame of readFrames(body(), limits)) out.push(frame);
  return out;
}

async function collect(events: AsyncIterable<LiveEvent>, max = Infinity): Promise<LiveEvent[]> {
  const out: LiveEvent[] = [];
  for await (const event of events) {
    out.push(event);
    if (out.length >= max) break;
  }
  return out;
}

describe("the SSE reader", () => {
  it("reads LF, CRLF and CR line ends, comments, multi-line data and ids, across chunks", async () => {
    assert.deepEqual(
      await frames([
        "retry: 1000\n: keep-alive\nid: t:1\nevent: progress\ndata: a\ndata: b\n\n",
        "id: t:2\r\ndata: c\r",
        "\n\r\nevent: reset\rdata: {}\r\r",
        "id: t:3\n\n",
      ]),
      [
        { id: "t:1", event: "progress", data: "a\nb" },
        { id: "t:2", event: "message", data: "c" },
        { event: "reset", data: "{}" },
      ],
    );
  });

  it("a line or a frame past its limit, or bytes that are not UTF-8, are MalformedStream", async () => {
    await assert.rejects(frames(["data: " + "x".repeat(100)]), MalformedStream);
    await assert.rejects(frames(["data: 1234567890\n".repeat(8)]), MalformedStream);
    await assert.rejects(
      (async () => {
        async function* body(): AsyncGenerator<Uint8Array> {
          yield new Uint8Array([0x64, 0x61, 0x74, 0x61, 0x3a, 0xff, 0x0a, 0x0a]);
        }
        for await (const _ of readFrames(body(), LIMITS)) {
          // reading is the point
        }
      })(),
      MalformedStream,
    );
  });
});

describe("follow against the service", () => {
  let service: Service;
  let log: EventLogClient;

  before(async () => {
    service = await startService("sqlite");
    log = new EventLogClient({ baseUrl: service.url });
  });

  after(async () => {
    await service.stop();
  });

  it("delivers the events after the claim as they come, then `end` after the terminal one", async () => {
    const generation = await log.openGeneration("live-end");
    await log.append(generation.token, [{ data: "a" }], { firstSeq: 1 });
    let opened: () => void = () => undefined;
    const open = new Promise<void>((resolve) => (opened = resolve));
    const following = collect(
      log.follow("live-end", { lastEventId: `${generation.token}:0`, onOpen: opened }),
    );
    await open;
    await log.append(generation.token, [{ data: "b", event: "progress" }], { firstSeq: 2 });
    await log.append(generation.token, [{ data: "c" }], { firstSeq: 3, terminal: true });
    const token = generation.token;
    assert.deepEqual(await following, [
      { kind: "event", id: `${token}:1`, generation: token, seq: 1, event: "message", data: "a" },
      { kind: "event", id: `${token}:2`, generation: token, seq: 2, event: "progress", data: "b" },
      { kind: "event", id: `${token}:3`, generation: token, seq: 3, event: "message", data: "c" },
      { kind: "end", generation: token, terminalSeq: 3 },
    ]);
  });

  it("a claim on a superseded generation: `reset`, then the new generation from seq 1", async () => {
    const old = await log.openGeneration("live-reset");
    await log.append(old.token, [{ data: "old" }], { firstSeq: 1 });
    const fresh = await log.openGeneration("live-reset", { reason: "reset" });
    await log.append(fresh.token, [{ data: "new" }], { firstSeq: 1 });
    const events = await collect(log.follow("live-reset", { lastEventId: `${old.token}:1` }), 2);
    assert.deepEqual(events[0], { kind: "reset", reason: "superseded", generation: fresh.token });
    assert.deepEqual(
      [events[1]?.kind, events[1]?.kind === "event" && events[1].data],
      ["event", "new"],
    );
  });

  it("an invalid claim is its refusal", async () => {
    const error = await failure(
      collect(log.follow("live-end", { lastEventId: "AAAAAAAAAAAAAAAAAAAAAA:1" })),
    );
    assert.equal(error.code, "unknown_generation");
  });
});

describe("follow against a hostile service", () => {
  let hostile: HostileService;

  before(async () => {
    hostile = await HostileService.start();
  });

  after(async () => {
    await hostile.stop();
  });

  const client = (key: string): EventLogClient =>
    new EventLogClient({ ...hostile.as(key), timeoutMs: 2_000 });

  it("an endless line is cut at the limit", async () => {
    const error = await failure(
      collect(client("sse-endless-line").follow("s", { maxFrameBytes: 1_048_576 })),
    );
    assert.ok(error instanceof ResponseTooLarge, error.message);
    assert.match(error.detail, /line is over 1048576 bytes/);
    const sent = (await hostile.state()).bytes["sse-endless-line"] ?? 0;
    assert.ok(sent < 64 * 1_048_576, `the service sent ${sent} bytes before the client stopped`);
  });

  it("malformed frames: the well-formed ones come through, the first bad one ends it", async () => {
    const events: LiveEvent[] = [];
    const error = await failure(
      (async () => {
        for await (const event of client("sse-malformed-reset").follow("s")) events.push(event);
      })(),
    );
    assert.ok(error instanceof MalformedResponse, error.message);
    assert.match(error.detail, /control event is not the contract's|not a JSON object/);
    assert.deepEqual(
      events.map((e) => (e.kind === "event" ? e.data : e.kind)),
      ["{not json", '{"method": 7}', '{"method": "notifications/unknown"}'],
    );
  });

  it("silence past the idle timeout, HTML, and a redirect are typed errors", async () => {
    const silent = await failure(collect(client("sse-silent").follow("s", { idleTimeoutMs: 500 })));
    assert.ok(silent instanceof DeadlineExceeded, silent.message);
    assert.match(silent.detail, /silent for 500 ms/);
    const html = await failure(collect(client("html").follow("s")));
    assert.ok(html instanceof UnexpectedContentType);
    assert.match(html.detail, /text\/html, not an event stream/);
    const redirect = await failure(collect(client("redirect").follow("s")));
    assert.ok(redirect instanceof Redirected);
    assert.equal(redirect.status, 307);
    assert.equal((await hostile.state()).elsewhere, 0);
  });
});
