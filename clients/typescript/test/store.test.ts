/** `EventLogEventStore` called as the SDK calls it, against a real service (SQLite, PostgreSQL). */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

import {
  GET_STREAM,
  newStoreStats,
  RESUME_REFUSED,
  ResumeRefused,
  UNSTORED_PREFIX,
} from "../src/index.js";
import { Logbook } from "./support/mcp.js";
import { proxiedService } from "./support/proxied.js";
import { BACKENDS, postgresSkip } from "./support/service.js";

type Sent = [string, JSONRPCMessage];

function recorder(): {
  sent: Sent[];
  send: (id: string, message: JSONRPCMessage) => Promise<void>;
} {
  const sent: Sent[] = [];
  return { sent, send: async (id, message) => void sent.push([id, message]) };
}

function note(i: number): JSONRPCMessage {
  return {
    jsonrpc: "2.0",
    method: "notifications/message",
    params: { level: "info", data: `step ${i}` },
  };
}

function answer(id: number, text = "done"): JSONRPCMessage {
  return { jsonrpc: "2.0", id, result: { content: [{ type: "text", text }] } };
}

const PRIMING = {} as JSONRPCMessage;

/** The one refusal a replay sent, which names no request: no `id` member at all. */
async function anonymousRefusal(
  replay: (send: (id: string, message: JSONRPCMessage) => Promise<void>) => Promise<string>,
): Promise<{ verdict: string; reason: string }> {
  const { sent, send } = recorder();
  assert.match(await replay(send), /^eventlog:refused:/);
  assert.equal(sent.length, 1, `sent ${JSON.stringify(sent)}`);
  const [eventId, message] = sent[0] ?? ["?", PRIMING];
  assert.equal(eventId, "");
  assert.ok("error" in message, "not an error");
  assert.ok(!("id" in message), `an id where none can be named: ${JSON.stringify(message)}`);
  assert.equal(message.error.code, RESUME_REFUSED);
  return message.error.data as { verdict: string; reason: string };
}

for (const backend of BACKENDS) {
  describe(
    `EventLogEventStore on ${backend}`,
    { skip: backend === "postgresql" ? await postgresSkip() : false },
    () => {
      const on = proxiedService(backend);
      const store = on.store;

      it("ids are the service's <token>:<seq>, streams are mcp.<scope>.<sdk stream>, and a replay sends exactly the missed messages across pages", async () => {
        const s = store({ pageLimit: 2 });
        const sdkStream = "6f1c2a8e-4b7d-4e59-9a3c-0d2e7f81b6c4";
        const ids = [await s.storeEvent(sdkStream, PRIMING)];
        for (let i = 1; i <= 6; i += 1) ids.push(await s.storeEvent(sdkStream, note(i)));
        ids.push(await s.storeEvent(sdkStream, answer(3)));
        const token = ids[0]?.split(":")[0] ?? "";
        assert.deepEqual(
          ids,
          Array.from({ length: 8 }, (_, i) => `${token}:${i + 1}`),
        );
        assert.ok(await s.flush(), "every message acknowledged");

        const view = await on.log.resume(`${token}:0`);
        assert.equal(view.streamId, `mcp.${s.scope}.${sdkStream}`);
        assert.deepEqual(
          view.events.map((e) => e.event),
          ["priming", ...Array(7).fill("message")],
        );

        const { sent, send } = recorder();
        assert.equal(await s.getStreamIdForEventId(ids[2] ?? ""), sdkStream);
        assert.equal(await s.replayEventsAfter(ids[2] ?? "", { send }), sdkStream);
        assert.deepEqual(sent, [
          [ids[3], note(3)],
          [ids[4], note(4)],
          [ids[5], note(5)],
          [ids[6], note(6)],
          [ids[7], answer(3)],
        ]);
        const fromPriming = recorder();
        await s.replayEventsAfter(ids[0] ?? "", { send: fromPriming.send });
        assert.equal(
          fromPriming.sent.length,
          7,
          "the priming event is never replayed as a message",
        );
        assert.deepEqual([s.stats.resumed, s.stats.replayedMessages, s.stats.refused], [2, 12, 0]);
      });

      it("a retried append whose answer was lost is stored once", async () => {
        // The REST path's faults (the channel's are test/channel.test.ts's), per event: the
        // retry happens inside the storeEvent that is measured.
        const s = store({ appendTransport: "rest", durability: "per_event" });
        const first = await s.storeEvent("r", note(1));
        on.proxy.inject(
          { kind: "lose-answer" },
          (method, path) => method === "POST" && path.endsWith("/events"),
        );
        const answersLost = on.proxy.count();
        const second = await s.storeEvent("r", note(2));
        assert.ok(on.proxy.count() >= answersLost + 2, "the append was sent again");
        const token = first.split(":")[0] ?? "";
        assert.equal(second, `${token}:2`);
        const page = await on.log.page(token);
        assert.equal(page.tailSeq, 2);
        assert.equal(s.stats.storeFailures, 0);
      });

      it("a message over the event limit is stored in parts and replayed whole", async () => {
        const s = store({ maxEventBytes: 1000 });
        const big = answer(9, "ü✓🙂".repeat(700));
        const priming = await s.storeEvent("big", PRIMING);
        const id = await s.storeEvent("big", big);
        assert.ok(await s.flush());
        const token = priming.split(":")[0] ?? "";
        const page = await on.log.page(token);
        const kinds = page.events.map((e) => e.event);
        const parts = kinds.filter((k) => k?.startsWith("message-part "));
        assert.ok(parts.length >= 6);
        assert.equal(kinds[kinds.length - 1], `message-part ${parts.length}/${parts.length}`);
        assert.equal(
          id,
          page.events[page.events.length - 1]?.id,
          "the client holds the last part's id",
        );
        for (const e of page.events) assert.ok(new TextEncoder().encode(e.data).length <= 1000);

        const { sent, send } = recorder();
        await s.replayEventsAfter(priming, { send });
        assert.deepEqual(sent, [[id, big]]);
      });

      it("a refused resume fails the answered request with -32010 and its own id", async () => {
        const s = store();
        const priming = await s.storeEvent("done", PRIMING);
        const first = await s.storeEvent("done", note(1));
        await s.storeEvent("done", answer(7));
        assert.ok(await s.flush());
        await on.log.openGeneration(`mcp.${s.scope}.done`, { reason: "reset" });

        const { sent, send } = recorder();
        const stream = await s.replayEventsAfter(first, { send });
        assert.match(stream, /^eventlog:refused:/);
        assert.equal(sent.length, 1);
        const [eventId, refusal] = sent[0] ?? ["?", PRIMING];
        assert.equal(
          eventId,
          "",
          "the refusal carries no event id: it never becomes a Last-Event-ID",
        );
        assert.ok("error" in refusal);
        assert.deepEqual(
          [refusal.id, refusal.error.code, refusal.error.message],
          [
            7,
            RESUME_REFUSED,
            "cannot resume (reset: superseded); discard partial output and re-issue",
          ],
        );
        const data = refusal.error.data as { verdict: string; reason: string; detail: string };
        assert.deepEqual([data.verdict, data.reason], ["reset", "superseded"]);
        assert.ok(data.detail.length > 0);
        assert.equal(s.stats.refused, 1);
        assert.ok(priming.length > 0);
      });

      it("with no request to name, a refusal goes without an id (never null) and to the transport's onerror", async () => {
        const s = store();
        const other = store();
        const reported: Error[] = [];
        s.attach({
          _eventStore: s,
          _requestToStreamMapping: new Map(),
          _streamMapping: new Map(),
          onerror: (error: Error) => reported.push(error),
        });
        const getId = await s.storeEvent(GET_STREAM, note(1));
        assert.ok(await s.flush());
        await on.log.openGeneration(`mcp.${s.scope}.${GET_STREAM}`);
        const refusals = [await anonymousRefusal((send) => s.replayEventsAfter(getId, { send }))];

        const foreign = await other.storeEvent("x", note(1));
        await other.storeEvent("x", answer(1));
        refusals.push(await anonymousRefusal((send) => s.replayEventsAfter(foreign, { send })));
        const unknown = "AAAAAAAAAAAAAAAAAAAAAA:3";
        refusals.push(await anonymousRefusal((send) => s.replayEventsAfter(unknown, { send })));
        // The SDK asks replayEventsAfter (rather than answering 400) only for a stream id.
        assert.equal(typeof (await s.getStreamIdForEventId("not an id")), "string");
        refusals.push(await anonymousRefusal((send) => s.replayEventsAfter("not an id", { send })));

        const expected = [
          ["reset", "superseded"],
          ["invalid", "cross_session"],
          ["invalid", "unknown_generation"],
          ["invalid", "malformed_id"],
        ];
        assert.deepEqual(
          refusals.map((r) => [r.verdict, r.reason]),
          expected,
        );
        assert.deepEqual(
          reported.map((e) =>
            e instanceof ResumeRefused ? [e.refusal.verdict, e.refusal.reason] : e.message,
          ),
          expected,
        );
        assert.equal(s.stats.refused, 4);
      });

      it("the service unreachable while storing: the message goes out unstored, and no resume crosses it", async () => {
        const logbook = new Logbook();
        // Per event: a message is stored before its id goes out (test/pipeline.test.ts has the
        // pipelined promise).
        const s = store({ logger: logbook, pauseAfterFailureMs: 60_000, durability: "per_event" });
        const before = await s.storeEvent("u", note(1));
        await s.storeEvent("u", answer(4));
        await on.proxy.down();
        try {
          const unstored = await s.storeEvent("u", note(2));
          assert.ok(unstored.startsWith(UNSTORED_PREFIX));
          const requests = on.proxy.requests.length;
          const paused = await s.storeEvent("other", note(1));
          assert.ok(paused.startsWith(UNSTORED_PREFIX));
          assert.equal(on.proxy.requests.length, requests, "while paused the service is not asked");
          assert.equal(s.stats.storeFailures, 2);
          assert.ok(logbook.has("warn", /went out unstored/));

          for (const id of [before, unstored]) {
            const { sent, send } = recorder();
            await s.replayEventsAfter(id, { send });
            assert.equal(sent.length, 1);
            const refusal = sent[0]?.[1];
            assert.ok(refusal !== undefined && "error" in refusal && refusal.id === 4);
            assert.deepEqual(refusal.error.data, {
              verdict: "reset",
              reason: "not_stored",
              detail: "a message of this stream after the id could not be stored",
            });
          }
        } finally {
          await on.proxy.up();
        }
      });

      it("after a failure the next write opens a new generation, and resumes from it work", async () => {
        const s = store({
          pauseAfterFailureMs: 0,
          appendTransport: "rest",
          durability: "per_event",
        });
        // The setup: one stored message. The previous test took the proxy down and up, and a
        // connection pooled before that can fail its first use once (the message then goes
        // out unstored, and the next write opens a generation anyway): write until stored.
        let first = await s.storeEvent("n", note(1));
        for (let tries = 1; first.startsWith(UNSTORED_PREFIX) && tries < 3; tries += 1) {
          first = await s.storeEvent("n", note(1));
        }
        assert.ok(!first.startsWith(UNSTORED_PREFIX), "the setup's message was never stored");
        on.proxy.inject(
          { kind: "drop" },
          (method, path) => method === "POST" && path.endsWith("/events"),
        );
        on.proxy.inject(
          { kind: "drop" },
          (method, path) => method === "POST" && path.endsWith("/events"),
        );
        assert.ok((await s.storeEvent("n", note(2))).startsWith(UNSTORED_PREFIX));
        const third = await s.storeEvent("n", note(3));
        const fourth = await s.storeEvent("n", note(4));
        assert.notEqual(third.split(":")[0], first.split(":")[0]);
        assert.equal(third.split(":")[1], "1");
        const superseded = await on.log.resume(first);
        assert.deepEqual([superseded.verdict, superseded.reason], ["reset", "superseded"]);
        const { sent, send } = recorder();
        assert.equal(await s.replayEventsAfter(third, { send }), "n");
        assert.deepEqual(sent, [[fourth, note(4)]]);
      });

      it("a generation fenced by someone else continues in a new one", async () => {
        // Per event: the next write hears the refusal (pipelined: test/pipeline.test.ts).
        const s = store({ durability: "per_event" });
        const first = await s.storeEvent("f", note(1));
        await on.log.openGeneration(`mcp.${s.scope}.f`);
        const second = await s.storeEvent("f", note(2));
        assert.notEqual(second.split(":")[0], first.split(":")[0]);
        assert.equal(second.split(":")[1], "1");
        assert.equal(s.stats.storeFailures, 0);
      });

      it("the service unreachable during a replay refuses it visibly, in bounded time", async () => {
        const s = store({ replayTimeoutMs: 2_000 });
        const id = await s.storeEvent("v", note(1));
        await s.storeEvent("v", answer(11));
        on.proxy.inject(
          { kind: "stall" },
          (method, path) => method === "POST" && path.endsWith("/resume"),
        );
        const { sent, send } = recorder();
        await s.replayEventsAfter(id, { send });
        const refusal = sent[0]?.[1];
        assert.ok(refusal !== undefined && "error" in refusal && refusal.id === 11);
        assert.equal((refusal.error.data as { verdict: string }).verdict, "unavailable");
      });

      it("a message stored during a replay waits for it, so it reaches the resumed connection live", async () => {
        const s = store({ pageLimit: 1 });
        const id = await s.storeEvent("w", note(1));
        await s.storeEvent("w", note(2));
        await s.storeEvent("w", note(3));
        // The replay's second page is slow: a store that did not wait would finish first.
        on.proxy.inject({ kind: "delay", ms: 300 }, (method) => method === "GET");
        const order: string[] = [];
        let live: Promise<string> | undefined;
        const replay = s
          .replayEventsAfter(id, {
            send: async () => {
              live ??= s.storeEvent("w", note(4)).then((stored) => {
                order.push("stored");
                return stored;
              });
            },
          })
          .then(() => order.push("replayed"));
        await replay;
        const fourth = await live;
        assert.deepEqual(order, ["replayed", "stored"]);
        assert.match(fourth ?? "", /:4$/);
      });

      it("one store per session: attaching it twice, or to another store's transport, throws; serving two sessions refuses every resume", async () => {
        const s = store();
        const transport = { _eventStore: s, _requestToStreamMapping: new Map() };
        assert.equal(s.attach(transport), transport);
        assert.throws(() => s.attach({ _eventStore: s }), /one session/);
        assert.throws(() => store().attach(transport), /another eventStore/);

        const logbook = new Logbook();
        const shared = store({ logger: logbook, stats: newStoreStats() });
        const init = (id: number): JSONRPCMessage => ({
          jsonrpc: "2.0",
          id,
          result: {
            protocolVersion: "2025-11-25",
            capabilities: {},
            serverInfo: { name: "s", version: "1" },
          },
        });
        const id = await shared.storeEvent("a", init(0));
        await shared.storeEvent("b", init(0));
        assert.ok(logbook.has("error", /second MCP session/));
        const refused = await anonymousRefusal((send) => shared.replayEventsAfter(id, { send }));
        assert.equal(refused.reason, "shared_store");
      });
    },
  );
}
