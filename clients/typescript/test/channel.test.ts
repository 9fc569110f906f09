/**
 * The append channel (`GET /v1/append`) against a real service process, on SQLite and
 * PostgreSQL: the REST append's answers and typed refusals frame by frame, a channel cut
 * with answers lost on the way (every frame resent with its `first_seq`, stored once, in
 * order), and the store over it end to end with the official SDK of both generations: by
 * default over the channel, reconnecting after a cut, over REST when a proxy refuses the
 * upgrade, and over REST only when told.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, afterEach, before, describe, it } from "node:test";

import {
  AppendChannel,
  ChannelUnavailable,
  defaultAppendTransport,
  EventLogClient,
  EventLogEventStore,
  type NewEvent,
  SeqConflict,
  SeqGap,
  Superseded,
  TerminalGeneration,
  UnknownGeneration,
  UNSTORED_PREFIX,
  ValidationFailed,
} from "../src/index.js";
import {
  connectClient,
  Logbook,
  McpFixture,
  type Sdk,
  steps,
  type TestClient,
} from "./support/mcp.js";
import { FaultyProxy } from "./support/proxy.js";
import { BACKENDS, postgresSkip, type Service, startService } from "./support/service.js";
import { failure } from "./support/failure.js";
import { waitFor } from "./support/wait.js";

const QUICK = { attempts: 4, baseDelayMs: 5, maxDelayMs: 50 };

function events(from: number, to: number): NewEvent[] {
  const list: NewEvent[] = [];
  for (let i = from; i <= to; i += 1) list.push({ data: `event ${i}`, event: "e" });
  return list;
}

for (const backend of BACKENDS) {
  describe(
    `the append channel on ${backend}`,
    { skip: backend === "postgresql" ? await postgresSkip() : false },
    () => {
      let service: Service;
      let proxy: FaultyProxy;
      let log: EventLogClient;
      let channel: AppendChannel;

      before(async () => {
        service = await startService(backend);
        proxy = await FaultyProxy.start(service.url);
        log = new EventLogClient({ baseUrl: service.url, retry: QUICK });
      });

      afterEach(() => {
        channel?.close();
        proxy.upgrades = "pass";
        proxy.loseChannelAnswers = false;
      });

      after(async () => {
        await proxy?.down();
        await service?.stop();
      });

      it("answers each frame as the REST append does: 201, then 200 duplicate for a repeat", async () => {
        channel = new AppendChannel({ baseUrl: service.url, retry: QUICK });
        const generation = await log.openGeneration("chan.answers");
        const first = await channel.append({
          generation: generation.token,
          events: events(1, 3),
          firstSeq: 1,
        });
        assert.deepEqual(
          first.eventIds,
          [1, 2, 3].map((i) => `${generation.token}:${i}`),
        );
        assert.deepEqual([first.duplicate, first.tailSeq, first.terminal], [false, 3, false]);
        const again = await channel.append({
          generation: generation.token,
          events: events(1, 3),
          firstSeq: 1,
        });
        assert.deepEqual([again.duplicate, again.eventIds], [true, first.eventIds]);
        const last = await channel.append({
          generation: generation.token,
          events: events(4, 4),
          firstSeq: 4,
          terminal: true,
        });
        assert.deepEqual([last.tailSeq, last.terminal], [4, true]);
        const page = await log.page(generation.token);
        assert.deepEqual(
          page.events.map((e) => e.data),
          events(1, 4).map((e) => e.data),
        );
        assert.equal(channel.counts.opened, 1);
      });

      it("refuses a frame with the REST append's typed error, and the channel stays open", async () => {
        channel = new AppendChannel({ baseUrl: service.url, retry: QUICK });
        const old = await log.openGeneration("chan.refusals");
        await log.append(old.token, events(1, 1), { firstSeq: 1 });
        const current = await log.openGeneration("chan.refusals");
        const done = await log.openGeneration("chan.refusals.done");
        await log.append(done.token, events(1, 1), { firstSeq: 1, terminal: true });
        const cases = [
          { kind: SeqGap, generation: current.token, events: events(5, 5), firstSeq: 5 },
          { kind: Superseded, generation: old.token, events: events(2, 2), firstSeq: 2 },
          { kind: TerminalGeneration, generation: done.token, events: events(2, 2), firstSeq: 2 },
          {
            kind: SeqConflict,
            generation: done.token,
            events: [{ data: "other" }],
            firstSeq: 1,
          },
          {
            kind: UnknownGeneration,
            generation: "A".repeat(22),
            events: events(1, 1),
            firstSeq: 1,
          },
          { kind: ValidationFailed, generation: current.token, events: events(1, 1), firstSeq: 0 },
        ];
        for (const { kind, ...frame } of cases) {
          const rest = await failure(
            log.append(frame.generation, frame.events, { firstSeq: frame.firstSeq }),
          );
          const framed = await failure(channel.append(frame));
          assert.ok(framed instanceof kind, `${kind.name}: got ${framed.name} ${framed.message}`);
          assert.equal(framed.constructor, rest.constructor);
          assert.deepEqual([framed.status, framed.code], [rest.status, rest.code]);
        }
        assert.equal(channel.counts.opened, 1, "a refused frame never closes the channel");
        const ok = await channel.append({
          generation: current.token,
          events: events(1, 1),
          firstSeq: 1,
        });
        assert.equal(ok.tailSeq, 1);
      });

      it("carries many streams at once, bounded in flight, each in its order", async () => {
        channel = new AppendChannel({ baseUrl: service.url, retry: QUICK, maxInFlight: 4 });
        const generations = await Promise.all(
          [0, 1, 2, 3, 4, 5, 6, 7].map((i) => log.openGeneration(`chan.many.${i}`)),
        );
        const appends = generations.flatMap((g) =>
          [1, 2, 3, 4, 5].map((seq) =>
            channel.append({ generation: g.token, events: events(seq, seq), firstSeq: seq }),
          ),
        );
        const results = await Promise.all(appends);
        assert.equal(channel.counts.peakInFlight, 4);
        assert.ok(results.every((r) => !r.duplicate));
        for (const g of generations) {
          const page = await log.page(g.token);
          assert.deepEqual(
            page.events.map((e) => e.data),
            events(1, 5).map((e) => e.data),
          );
        }
        assert.equal(channel.counts.opened, 1);
      });

      it("a channel cut with its answers lost: every frame resent with first_seq, stored once, in order", async () => {
        channel = new AppendChannel({ baseUrl: proxy.url, retry: QUICK, timeoutMs: 20_000 });
        const generation = await log.openGeneration("chan.cut");
        await channel.append({ generation: generation.token, events: events(1, 1), firstSeq: 1 });
        proxy.loseChannelAnswers = true;
        const appends = [2, 3, 4, 5, 6, 7, 8, 9, 10].map((seq) =>
          channel.append({ generation: generation.token, events: events(seq, seq), firstSeq: seq }),
        );
        // The service stores every frame; none of its answers gets through.
        for (;;) {
          const page = await log.page(generation.token);
          if (page.tailSeq === 10) break;
          await new Promise((r) => setTimeout(r, 20));
        }
        assert.equal(channel.counts.answered, 1);
        proxy.loseChannelAnswers = false;
        proxy.dropChannels();
        const results = await Promise.all(appends);
        assert.deepEqual(
          results.map((r) => r.eventIds[0]),
          [2, 3, 4, 5, 6, 7, 8, 9, 10].map((seq) => `${generation.token}:${seq}`),
        );
        assert.ok(
          results.every((r) => r.duplicate),
          "each resent frame is answered 200 duplicate",
        );
        assert.equal(channel.counts.resent, 9);
        assert.equal(channel.counts.opened, 2);
        const page = await log.page(generation.token);
        assert.deepEqual(
          page.events.map((e) => [e.seq, e.data]),
          events(1, 10).map((e, i) => [i + 1, e.data]),
        );
      });

      it("a frame of a channel cut before it was sent is sent once, on the next channel", async () => {
        channel = new AppendChannel({ baseUrl: proxy.url, retry: QUICK });
        const generation = await log.openGeneration("chan.reopen");
        await channel.append({ generation: generation.token, events: events(1, 1), firstSeq: 1 });
        proxy.dropChannels();
        await waitFor(() => proxy.openChannels === 0, "the cut");
        const next = await channel.append({
          generation: generation.token,
          events: events(2, 2),
          firstSeq: 2,
        });
        assert.deepEqual([next.duplicate, next.tailSeq], [false, 2]);
        assert.equal(channel.counts.opened, 2);
      });
    },
  );
}

const PAIRINGS: readonly { sdk: Sdk; backend: (typeof BACKENDS)[number] }[] = [
  { sdk: "v1", backend: "sqlite" },
  { sdk: "v2", backend: "sqlite" },
  { sdk: "v1", backend: "postgresql" },
];

for (const { sdk, backend } of PAIRINGS) {
  describe(
    `EventLogEventStore over the channel, SDK ${sdk}, on ${backend}`,
    { skip: backend === "postgresql" ? await postgresSkip() : false },
    () => {
      let service: Service;
      let proxy: FaultyProxy;
      let log: EventLogClient;
      let mcp: McpFixture | undefined;
      let session: TestClient | undefined;

      before(async () => {
        service = await startService(backend);
        proxy = await FaultyProxy.start(service.url);
        log = new EventLogClient({ baseUrl: service.url });
      });

      afterEach(async () => {
        await session?.close();
        await mcp?.close();
        AppendChannel.closeShared();
        proxy.upgrades = "pass";
      });

      after(async () => {
        await proxy?.down();
        await service?.stop();
      });

      /** Call `steps` and return every resumption token it was given. */
      async function call(
        args: { run: string; count: number; pauseAfter?: number },
        tokens: string[] = [],
      ): Promise<string[]> {
        const outcome = await session?.call("steps", args, {
          onresumptiontoken: (token) => tokens.push(token),
        });
        assert.deepEqual(outcome, { kind: "result", text: `${args.run} done` });
        return tokens;
      }

      /** The stored messages after `token`, read back through the service. */
      async function storedAfter(token: string): Promise<string[]> {
        for (const store of mcp?.stores ?? []) assert.ok(await store.flush(), "acknowledged");
        const answer = await log.resume(token);
        assert.equal(answer.verdict, "resume");
        const data = answer.events.map((e) => e.data);
        if (answer.nextAfter !== null && answer.generation !== null) {
          for await (const e of log.eventsAfter(answer.generation, answer.nextAfter)) {
            data.push(e.data);
          }
        }
        return data;
      }

      it("stores every message over the channel, one channel for every session", async () => {
        const passed = proxy.upgradesPassed;
        const posted = proxy.count((m, p) => m === "POST" && p.endsWith("/events"));
        // Per event: one frame per message (pipelined, frames carry several).
        mcp = await McpFixture.start({ baseUrl: proxy.url, durability: "per_event" }, sdk);
        session = await connectClient(mcp.url, { sdk });
        const tokens = await call({ run: "a", count: 20 });
        const other = await connectClient(mcp.url, { sdk });
        try {
          const outcome = await other.call("steps", { run: "b", count: 5 });
          assert.deepEqual(outcome, { kind: "result", text: "b done" });
        } finally {
          await other.close();
        }
        assert.deepEqual(session.notes, steps("a", 1, 20));
        const [first, second] = mcp.stores;
        assert.ok(first?.channel !== undefined && first.channel === second?.channel);
        assert.equal(first.channel.counts.opened, 1);
        assert.equal(proxy.upgradesPassed, passed + 1, "one channel for the process");
        assert.ok(first.channel.counts.answered >= 27, `${first.channel.counts.answered}`);
        assert.equal(
          proxy.count((m, p) => m === "POST" && p.endsWith("/events")),
          posted,
        );
        assert.deepEqual([first.stats.storeFailures, first.stats.channelFallbacks], [0, 0]);
        const firstToken = tokens[0] ?? "";
        assert.ok(!firstToken.startsWith(UNSTORED_PREFIX), firstToken);
        // The first id is the priming event's: after it, every step and the result.
        const stored = await storedAfter(firstToken);
        assert.deepEqual(
          stored.slice(0, 20).map((d) => /a step (\d+)/.exec(d)?.[1]),
          [...Array(20).keys()].map((i) => String(i + 1)),
        );
        assert.match(stored[20] ?? "", /a done/);
        assert.equal(stored.length, 21);
      });

      it("a channel cut mid-call is reopened: every message stored once, in order", async () => {
        mcp = await McpFixture.start({ baseUrl: proxy.url, retry: QUICK }, sdk);
        session = await connectClient(mcp.url, { sdk });
        const tokens: string[] = [];
        const running = call({ run: "c", count: 30, pauseAfter: 10 }, tokens);
        await waitFor(() => mcp?.sent.get("c") === 10, "the first ten steps");
        const opened = proxy.upgradesPassed;
        proxy.dropChannels();
        mcp.gate("c:mid").open();
        await running;
        const store = mcp.stores[0];
        assert.ok(await store?.flush(), "acknowledged"); // pipelined: appends follow the call
        assert.deepEqual([store?.stats.storeFailures, store?.stats.channelFallbacks], [0, 0]);
        assert.equal(proxy.upgradesPassed, opened + 1, "one more channel");
        assert.ok(tokens.every((t) => !t.startsWith(UNSTORED_PREFIX)));
        const stored = await storedAfter(tokens[0] ?? "");
        assert.deepEqual(
          stored.slice(0, 30).map((d) => /c step (\d+)/.exec(d)?.[1]),
          [...Array(30).keys()].map((i) => String(i + 1)),
        );
        assert.equal(stored.length, 31, "every step once, and the result");
      });

      it("a proxy that refuses the upgrade: every message stored over REST, counted, logged once", async () => {
        proxy.upgrades = "refuse";
        const asked = proxy.upgradesAsked;
        // Per event: one append per message, each counted (pipelined, appends carry several).
        mcp = await McpFixture.start(
          { baseUrl: proxy.url, retry: QUICK, durability: "per_event" },
          sdk,
        );
        session = await connectClient(mcp.url, { sdk });
        const tokens = await call({ run: "f", count: 10 });
        const store = mcp.stores[0];
        assert.equal(store?.stats.storeFailures, 0);
        assert.ok((store?.stats.channelFallbacks ?? 0) >= 10, `${store?.stats.channelFallbacks}`);
        assert.equal(proxy.upgradesAsked, asked + 1, "asked once, not per append");
        const lines = mcp.logbook.lines.filter((l) => /appending over REST/.test(l.message));
        assert.equal(lines.length, 1);
        assert.match(lines[0]?.message ?? "", /could not be opened: 502 http_error/);
        assert.equal((await storedAfter(tokens[0] ?? "")).length, 11, "every step, the result");
      });

      it("appendTransport 'rest': no channel is asked for", async () => {
        const asked = proxy.upgradesAsked;
        mcp = await McpFixture.start({ baseUrl: proxy.url, appendTransport: "rest" }, sdk);
        session = await connectClient(mcp.url, { sdk });
        await call({ run: "r", count: 3 });
        assert.equal(mcp.stores[0]?.channel, undefined);
        assert.equal(proxy.upgradesAsked, asked);
        assert.ok(proxy.count((m, p) => m === "POST" && p.endsWith("/events")) >= 4);
      });
    },
  );
}

describe("a key at its channel limit (EVENTLOG_CHANNEL_MAX_PER_KEY=1)", () => {
  let service: Service;
  let holder: AppendChannel | undefined;

  before(async () => {
    service = await startService("sqlite", { env: { EVENTLOG_CHANNEL_MAX_PER_KEY: "1" } });
  });

  after(async () => {
    holder?.close();
    AppendChannel.closeShared();
    await service?.stop();
  });

  it("a channel turned away (1013) is ChannelUnavailable, and the store appends over REST", async () => {
    const log = new EventLogClient({ baseUrl: service.url });
    const generation = await log.openGeneration("chan.limit");
    holder = new AppendChannel({ baseUrl: service.url });
    await holder.append({ generation: generation.token, events: events(1, 1), firstSeq: 1 });
    const second = new AppendChannel({ baseUrl: service.url, retry: QUICK });
    try {
      const error = await failure(
        second.append({ generation: generation.token, events: events(2, 2), firstSeq: 2 }),
      );
      assert.equal(error.constructor, ChannelUnavailable, `${error.name}: ${error.message}`);
      assert.match(error.detail, /1013 too_many_channels/);
    } finally {
      second.close();
    }
    const logbook = new Logbook();
    const store = new EventLogEventStore({ baseUrl: service.url, logger: logbook, retry: QUICK });
    const id = await store.storeEvent("s", {
      jsonrpc: "2.0",
      method: "notifications/message",
      params: { level: "info", data: "over REST" },
    });
    assert.ok(await store.flush(), "acknowledged"); // pipelined: the append follows the id
    assert.ok(!id.startsWith(UNSTORED_PREFIX), id);
    assert.deepEqual([store.stats.channelFallbacks, store.stats.storeFailures], [1, 0]);
    assert.ok(logbook.has("warn", /too_many_channels.*appending over REST/));
  });
});

describe("an idle channel", () => {
  let service: Service;

  before(async () => {
    service = await startService("sqlite");
  });

  after(async () => {
    await service?.stop();
  });

  it("does not hold the process open (the service would close it only after 60 s)", async () => {
    const index = new URL("../src/index.js", import.meta.url).href;
    const program =
      `import { EventLogEventStore } from ${JSON.stringify(index)};\n` +
      `const s = new EventLogEventStore({ baseUrl: ${JSON.stringify(service.url)} });\n` +
      `const id = await s.storeEvent("x", { jsonrpc: "2.0", method: "m", params: {} });\n` +
      `await s.flush();\n` +
      `console.log(JSON.stringify({ id, opened: s.channel?.counts.opened }));\n`;
    const started = Date.now();
    const child = spawn(process.execPath, ["--input-type=module", "-e", program]);
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
    const killer = setTimeout(() => child.kill("SIGKILL"), 45_000);
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    clearTimeout(killer);
    const ms = Date.now() - started;
    assert.equal(code, 0, `the process was killed after ${ms} ms, held open: ${out}`);
    const { id, opened } = JSON.parse(out) as { id: string; opened: number };
    assert.ok(!id.startsWith(UNSTORED_PREFIX) && opened === 1, out);
    assert.ok(ms < 40_000, `exited after ${ms} ms`);
  });
});

describe("EVENTLOG_APPEND_TRANSPORT", () => {
  it("chooses the default transport: channel unless it says rest", () => {
    const saved = process.env["EVENTLOG_APPEND_TRANSPORT"];
    try {
      for (const [value, transport] of [
        [undefined, "channel"],
        ["", "channel"],
        ["channel", "channel"],
        [" REST ", "rest"],
      ] as const) {
        if (value === undefined) delete process.env["EVENTLOG_APPEND_TRANSPORT"];
        else process.env["EVENTLOG_APPEND_TRANSPORT"] = value;
        assert.equal(defaultAppendTransport(), transport);
      }
      process.env["EVENTLOG_APPEND_TRANSPORT"] = "carrier-pigeon";
      assert.throws(() => defaultAppendTransport(), /not "channel" or "rest"/);
    } finally {
      if (saved === undefined) delete process.env["EVENTLOG_APPEND_TRANSPORT"];
      else process.env["EVENTLOG_APPEND_TRANSPORT"] = saved;
    }
  });
});
