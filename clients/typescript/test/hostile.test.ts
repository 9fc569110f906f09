/**
 * The client and the store against the repository's hostile fake service in a process of its
 * own (`tests/support/hostile_service.py`, through `support/hostile.ts`): HTML, JSON that is
 * not JSON, a drip, a body that never ends, a gzip bomb, redirects to another host. Every answer is a typed error within one deadline,
 * nothing is sent where a redirect points, and an MCP session on such a "service" goes on
 * with its messages sent unstored, counted and logged.
 */

import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";

import {
  AppendChannel,
  ChannelUnavailable,
  DeadlineExceeded,
  EventLogClient,
  type EventLogEventStoreOptions,
  EventLogServerEventBus,
  InvalidResponse,
  MalformedResponse,
  Redirected,
  ResponseTooLarge,
  ServiceUnreachable,
  UnexpectedContentType,
  UNSTORED_PREFIX,
} from "../src/index.js";
import { HostileService } from "./support/hostile.js";
import { connectClient, Logbook, McpFixture, steps, type TestClient } from "./support/mcp.js";
import { timed } from "./support/wait.js";
import { failure } from "./support/failure.js";

const CAP = 1_048_576;
const NO_RETRY = { attempts: 1, baseDelayMs: 1, maxDelayMs: 1 };

let hostile: HostileService;

before(async () => {
  hostile = await HostileService.start();
});

after(async () => {
  await hostile.stop();
});

function client(key: string, timeoutMs = 5_000): EventLogClient {
  return new EventLogClient({
    ...hostile.as(key),
    timeoutMs,
    maxResponseBytes: CAP,
    retry: NO_RETRY,
  });
}

describe("the client against a hostile service", () => {
  for (const [key, kind, pattern] of [
    ["html", UnexpectedContentType, /text\/html, not JSON/],
    ["not-json", MalformedResponse, /not JSON: <html>/],
    ["missing-fields", MalformedResponse, /has no string "stream_id"/],
    ["not-utf8", MalformedResponse, /not UTF-8/],
  ] as const) {
    it(`${key}: a 2xx that is not the contract's answer is a ${kind.name}`, async () => {
      const error = await failure(client(key).stream("s"));
      assert.ok(error instanceof kind, `${error.name}: ${error.message}`);
      assert.ok(error instanceof InvalidResponse);
      assert.match(error.detail, pattern);
    });
  }

  it("a drip is cut by the attempt's one deadline", async () => {
    const { ms, error } = await timed(client("drip", 1_500).stream("s"));
    assert.ok(
      error instanceof DeadlineExceeded && error instanceof ServiceUnreachable,
      String(error),
    );
    assert.ok(ms < 10_000, `cut after ${ms} ms`);
  });

  for (const key of ["huge", "gzip-bomb"]) {
    it(`${key}: a body past the cap is cut there, not buffered`, async () => {
      const before = (await hostile.state()).bytes[key] ?? 0;
      const error = await failure(client(key, 30_000).stream("s"));
      assert.ok(error instanceof ResponseTooLarge, `${error.name}: ${error.message}`);
      assert.match(error.detail, new RegExp(`over ${CAP} bytes`));
      // Decoded, the gzip stream is a thousand times what was sent: what counts is decoded.
      const sent = ((await hostile.state()).bytes[key] ?? 0) - before;
      assert.ok(sent < 64 * CAP, `the service sent ${sent} bytes before the client stopped`);
    });
  }

  for (const [key, status] of [
    ["redirect", 307],
    ["redirect-302", 302],
  ] as const) {
    it(`a ${status} redirect to another host is an error, and that host receives nothing`, async () => {
      const log = client(key);
      const open = await failure(log.openGeneration("s"));
      const append = await failure(log.append("g", [{ data: "secret event" }], { firstSeq: 1 }));
      for (const error of [open, append]) {
        assert.ok(error instanceof Redirected, `${error.name}: ${error.message}`);
        assert.equal(error.status, status);
        assert.match(error.detail, /redirect .* never followed/);
      }
      assert.equal((await hostile.state()).elsewhere, 0);
    });
  }
});

/**
 * What a test of an MCP session on the hostile service opens: an MCP server whose store points
 * at `key` (one try, 1 s deadlines, the cap; `options` on top) and a client's session to it,
 * both closed after each test of the block.
 */
function sessions(): (
  key: string,
  options?: Partial<EventLogEventStoreOptions>,
) => Promise<{ mcp: McpFixture; session: TestClient }> {
  let mcp: McpFixture | undefined;
  let session: TestClient | undefined;

  afterEach(async () => {
    await session?.close();
    await mcp?.close();
  });

  return async (key, options = {}) => {
    mcp = await McpFixture.start({
      ...hostile.as(key),
      retry: NO_RETRY,
      timeoutMs: 1_000,
      storeTimeoutMs: 1_000,
      maxResponseBytes: CAP,
      ...options,
    });
    session = await connectClient(mcp.url);
    return { mcp, session };
  };
}

describe("an MCP session whose store points at a hostile service", () => {
  const open = sessions();

  for (const key of ["html", "drip", "huge", "gzip-bomb", "redirect"]) {
    it(`${key}: every message goes out unstored, counted and logged, and the session goes on`, async () => {
      const { mcp, session } = await open(key);
      for (const run of ["first", "second"]) {
        const tokens: string[] = [];
        const outcome = await session.call(
          "steps",
          { run, count: 3 },
          { onresumptiontoken: (token) => tokens.push(token) },
        );
        assert.deepEqual(outcome, { kind: "result", text: `${run} done` });
        assert.ok(tokens.length > 0 && tokens.every((t) => t.startsWith(UNSTORED_PREFIX)));
      }
      assert.deepEqual(session.notes, [...steps("first", 1, 3), ...steps("second", 1, 3)]);
      const store = mcp.stores[0];
      assert.ok((store?.stats.storeFailures ?? 0) >= 8, `${store?.stats.storeFailures} failures`);
      assert.equal(store?.stats.stored, 0);
      assert.ok(mcp.logbook.has("warn", /went out unstored/));
      assert.deepEqual(mcp.transportErrors, []);
      assert.equal((await hostile.state()).elsewhere, 0);
    });
  }
});

describe("the append channel against a hostile service", () => {
  function channel(key: string, timeoutMs = 5_000): AppendChannel {
    return new AppendChannel({
      ...hostile.as(key),
      timeoutMs,
      maxResponseBytes: CAP,
      retry: { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 },
    });
  }

  const frame = { generation: "g", events: [{ data: "secret event" }], firstSeq: 1 };

  for (const [key, kind, pattern] of [
    ["ws-garbage", MalformedResponse, /not a JSON object: <html>/],
    ["ws-wrong-id", MalformedResponse, /the answer to frame 1001, not 1/],
    ["ws-missing-fields", MalformedResponse, /has no list "event_ids"/],
    ["ws-binary", MalformedResponse, /a binary frame/],
    ["ws-huge", ResponseTooLarge, /cannot be read: Max payload size exceeded/],
  ] as const) {
    it(`${key}: a frame that is not an answer is a ${kind.name}, never retried`, async () => {
      const c = channel(key);
      try {
        const before = (await hostile.state()).frames[key] ?? 0;
        const error = await failure(c.append(frame));
        assert.ok(error instanceof kind, `${error.name}: ${error.message}`);
        assert.match(error.detail, pattern);
        assert.equal(((await hostile.state()).frames[key] ?? 0) - before, 1, "sent once");
        // A channel that broke the order is not trusted after it: the next frame goes on a
        // new one (an answer to the right frame, only malformed, keeps the channel).
        assert.ok((await failure(c.append(frame))) instanceof kind);
        assert.equal(c.counts.opened, key === "ws-missing-fields" ? 1 : 2);
      } finally {
        c.close();
      }
    });
  }

  it("ws-silent: a channel that never answers is cut by the attempt's deadline, then retried, then DeadlineExceeded", async () => {
    const c = channel("ws-silent", 700);
    try {
      const { ms, error } = await timed(c.append(frame));
      assert.ok(error instanceof DeadlineExceeded, String(error));
      assert.match(error.detail, /no answer on the channel within 700 ms/);
      assert.ok(ms >= 3 * 700 && ms < 15_000, `failed after ${ms} ms`);
      assert.equal(c.counts.opened, 3, "one channel per attempt");
    } finally {
      c.close();
    }
  });

  it("ws-silent: a frame without firstSeq is never sent twice", async () => {
    const c = channel("ws-silent", 500);
    try {
      const before = (await hostile.state()).frames["ws-silent"] ?? 0;
      const error = await failure(c.append({ generation: "g", events: [{ data: "x" }] }));
      assert.ok(error instanceof ServiceUnreachable, String(error));
      assert.equal(((await hostile.state()).frames["ws-silent"] ?? 0) - before, 1);
    } finally {
      c.close();
    }
  });

  it("ws-close: a channel closed on every frame is reopened and resent to, then ServiceUnreachable", async () => {
    const c = channel("ws-close");
    try {
      const before = (await hostile.state()).frames["ws-close"] ?? 0;
      const error = await failure(c.append(frame));
      assert.ok(error instanceof ServiceUnreachable, String(error));
      assert.match(error.detail, /the channel dropped before answering: .*1011 hostile/);
      assert.equal(
        ((await hostile.state()).frames["ws-close"] ?? 0) - before,
        3,
        "one per attempt",
      );
      assert.equal(c.counts.resent, 2);
    } finally {
      c.close();
    }
  });

  for (const [key, pattern] of [
    ["ws-redirect", /redirect \(307 to http:\/\/127\.0\.0\.2:\d+\/v1\/append\); never followed/],
    ["ws-refuse", /404 not_found: no such route/],
  ] as const) {
    it(`${key}: a refused upgrade is ChannelUnavailable at once, and for a while`, async () => {
      const c = channel(key);
      try {
        const error = await failure(c.append(frame));
        assert.ok(error instanceof ChannelUnavailable, String(error));
        assert.match(error.detail, pattern);
        const again = await timed(c.append(frame));
        assert.equal(again.error, error, "not asked again within retryAfterMs");
        assert.equal(c.counts.openFailures, 1);
        assert.equal((await hostile.state()).elsewhere, 0);
      } finally {
        c.close();
      }
    });
  }
});

describe("an MCP session whose store's append channel is hostile", () => {
  const open = sessions();

  for (const key of [
    "ws-garbage",
    "ws-wrong-id",
    "ws-binary",
    "ws-huge",
    "ws-silent",
    "ws-close",
    "ws-redirect",
    "ws-refuse",
  ]) {
    const fallsBack = key === "ws-redirect" || key === "ws-refuse";
    const outcome = fallsBack ? "are stored over REST" : "go out unstored, counted and logged";
    it(`per event, ${key}: the messages ${outcome}, and the session goes on`, async () => {
      const { mcp, session } = await open(key, { pauseAfterFailureMs: 0, durability: "per_event" });
      const outcome = await session.call("steps", { run: "r", count: 3 });
      assert.deepEqual(outcome, { kind: "result", text: "r done" });
      assert.deepEqual(session.notes, steps("r", 1, 3));
      const stats = mcp.stores[0]?.stats;
      assert.deepEqual(mcp.transportErrors, []);
      if (fallsBack) {
        assert.equal(stats?.storeFailures, 0);
        assert.ok((stats?.channelFallbacks ?? 0) >= 4, `${stats?.channelFallbacks} fallbacks`);
        assert.equal(
          mcp.logbook.lines.filter((l) => /appending over REST/.test(l.message)).length,
          1,
          "logged once",
        );
      } else {
        assert.equal(stats?.stored, 0);
        assert.ok((stats?.storeFailures ?? 0) >= 4, `${stats?.storeFailures} failures`);
        assert.equal(stats?.channelFallbacks, 0);
        assert.ok(mcp.logbook.has("warn", /went out unstored/));
      }
    });

    const pipelined = fallsBack
      ? "are stored over REST"
      : "go out, and their loss is counted and logged";
    it(`pipelined, ${key}: the messages ${pipelined}, and the session goes on`, async () => {
      AppendChannel.closeShared(); // the per-event test's channel (and its logged outage) goes
      const { mcp, session } = await open(key, { pauseAfterFailureMs: 0, giveUpAfterMs: 1_000 });
      const outcome = await session.call("steps", { run: "r", count: 3 });
      assert.deepEqual(outcome, { kind: "result", text: "r done" });
      assert.deepEqual(session.notes, steps("r", 1, 3));
      const store = mcp.stores[0];
      const acknowledged = await store?.flush(15_000);
      const stats = store?.stats;
      assert.deepEqual(mcp.transportErrors, []);
      if (fallsBack) {
        assert.equal(acknowledged, true);
        assert.deepEqual([stats?.storeFailures, stats?.lost], [0, 0]);
        assert.ok((stats?.channelFallbacks ?? 0) >= 1, `${stats?.channelFallbacks} fallbacks`);
        assert.equal(
          mcp.logbook.lines.filter((l) => /appending over REST/.test(l.message)).length,
          1,
          "logged once",
        );
      } else {
        assert.equal(acknowledged, false, "a hostile channel acknowledged the messages");
        assert.ok((stats?.lost ?? 0) + (stats?.storeFailures ?? 0) >= 1, JSON.stringify(stats));
        assert.equal(stats?.channelFallbacks, 0);
        assert.ok(mcp.logbook.has("warn", /went out and were not stored|went out unstored/));
      }
    });
  }
});

describe("a bus whose service is hostile", () => {
  for (const key of ["html", "huge", "redirect"]) {
    it(`${key}: publishes are dropped and counted, the follower never throws, nothing is sent elsewhere`, async () => {
      const logger = new Logbook();
      const bus = new EventLogServerEventBus({
        ...hostile.as(key),
        retry: NO_RETRY,
        maxResponseBytes: CAP,
        logger,
      });
      try {
        const start = await failure(bus.start());
        assert.ok(start instanceof InvalidResponse, `${start.name}: ${start.message}`);
        bus.subscribe(() => assert.fail("nothing can be heard"));
        bus.publish({ kind: "resource_updated", uri: "file:///secret.md" });
        await bus.flush();
        assert.deepEqual([bus.stats.published, bus.stats.publishFailures], [0, 1]);
        assert.ok(logger.has("warn", /publishing to mcp-bus\.default failed/));
        assert.equal((await hostile.state()).elsewhere, 0);
      } finally {
        await bus.close();
      }
    });
  }
});
