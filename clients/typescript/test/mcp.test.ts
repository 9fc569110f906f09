/**
 * End to end with the real TypeScript SDKs of both generations, one EventLogEventStore per
 * session, SDK clients over HTTP, a real service process, and a proxy between the store and
 * the service to take it away:
 *
 * - server 1.x (`McpServer` + `StreamableHTTPServerTransport`) with the 1.x client;
 * - server 2.x (legacy requests routed to `WebStandardStreamableHTTPServerTransport`) with
 *   the 2.x client and with the 1.x client;
 * - server 1.x with the 2.x client;
 *
 * every pairing on SQLite, the 1.x and 2.x pairs on PostgreSQL too.
 */

import assert from "node:assert/strict";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";

import {
  EventLogClient,
  type EventLogEventStoreOptions,
  RESUME_REFUSED,
  ResumeRefused,
  UNSTORED_PREFIX,
} from "../src/index.js";
import {
  type CallOutcome,
  connectClient,
  McpFixture,
  type Sdk,
  steps,
  type TestClient,
} from "./support/mcp.js";
import { FaultyProxy } from "./support/proxy.js";
import { type Backend, postgresSkip, type Service, startService } from "./support/service.js";
import { Gate, timed, waitFor } from "./support/wait.js";

interface Pairing {
  readonly server: Sdk;
  readonly client: Sdk;
  readonly backend: Backend;
}

const PAIRINGS: readonly Pairing[] = [
  { server: "v1", client: "v1", backend: "sqlite" },
  { server: "v2", client: "v2", backend: "sqlite" },
  { server: "v2", client: "v1", backend: "sqlite" },
  { server: "v1", client: "v2", backend: "sqlite" },
  { server: "v1", client: "v1", backend: "postgresql" },
  { server: "v2", client: "v2", backend: "postgresql" },
];

interface Call {
  readonly outcome: Promise<CallOutcome>;
  readonly tokens: string[];
}

function callSteps(
  c: TestClient,
  args: { run: string; count: number; pauseAfter?: number; holdResult?: boolean },
  options: { timeout?: number; resumptionToken?: string } = {},
): Call {
  const tokens: string[] = [];
  const outcome = c.call("steps", args, {
    ...options,
    onresumptiontoken: (token) => tokens.push(token),
  });
  return { outcome, tokens };
}

function refusal(outcome: CallOutcome): { verdict: string; reason: string } {
  assert.equal(outcome.kind, "error", `not refused: ${JSON.stringify(outcome)}`);
  assert.ok(outcome.kind === "error");
  assert.equal(outcome.code, RESUME_REFUSED);
  const data = outcome.data as { verdict: string; reason: string };
  return { verdict: data.verdict, reason: data.reason };
}

/** The whole body of `response` if it ends within `ms`, else undefined. */
async function bodyWithin(response: Response, ms: number): Promise<string | undefined> {
  const timer = AbortSignal.timeout(ms);
  try {
    return await Promise.race([
      response.text(),
      new Promise<undefined>((resolve) =>
        timer.addEventListener("abort", () => resolve(undefined)),
      ),
    ]);
  } finally {
    await response.body?.cancel().catch(() => undefined);
  }
}

for (const { server, client: clientSdk, backend } of PAIRINGS) {
  describe(
    `SDK ${server} server, ${clientSdk} client, EventLogEventStore on ${backend}`,
    { skip: backend === "postgresql" ? await postgresSkip() : false },
    () => {
      let service: Service;
      let proxy: FaultyProxy;
      let mcp: McpFixture;
      let log: EventLogClient;
      const clients: TestClient[] = [];

      async function client(sessionId?: string): Promise<TestClient> {
        const c = await connectClient(mcp.url, { sdk: clientSdk, sessionId });
        clients.push(c);
        return c;
      }

      before(async () => {
        service = await startService(backend);
        proxy = await FaultyProxy.start(service.url);
        log = new EventLogClient({ baseUrl: service.url });
      });

      const storeOptions = (): EventLogEventStoreOptions => ({
        baseUrl: proxy.url,
        retry: { attempts: 2, baseDelayMs: 5, maxDelayMs: 50 },
        pauseAfterFailureMs: 200,
      });

      /** This test's stores store every message before it is sent (`durability: "per_event"`). */
      async function perEvent(): Promise<void> {
        await mcp.close();
        mcp = await McpFixture.start({ ...storeOptions(), durability: "per_event" }, server);
      }

      beforeEach(async () => {
        mcp = await McpFixture.start(storeOptions(), server);
      });

      afterEach(async () => {
        for (const c of clients.splice(0)) await c.close();
        await mcp.close();
      });

      after(async () => {
        await proxy?.down();
        await service?.stop();
      });

      it("a client cut off mid-call reconnects by itself and gets every message once, in order", async () => {
        const c = await client();
        const call = callSteps(c, { run: "a", count: 10, pauseAfter: 4, holdResult: true });
        await waitFor(() => c.notes.length === 4, "the first four steps");
        c.cutter.holdResumes = new Gate();
        c.cutter.cut();
        await waitFor(() => mcp.cutResponses === 1, "the server to see the cut");
        mcp.gate("a:mid").open();
        await waitFor(() => mcp.sent.get("a") === 10, "the tool to send every step");
        c.cutter.holdResumes.open();
        await waitFor(() => mcp.stores[0]?.stats.resumed === 1, "the resume");
        mcp.gate("a:end").open();

        assert.deepEqual(await call.outcome, { kind: "result", text: "a done" });
        assert.deepEqual(c.notes, steps("a", 1, 10));
        assert.equal(
          mcp.stores[0]?.stats.replayedMessages,
          6,
          "steps 5..10 were replayed, the result went out live",
        );
        assert.match(
          c.cutter.resumedFrom[0] ?? "",
          /^[A-Za-z0-9_-]+:5$/,
          "the client resumed from step 4's id",
        );
      });

      it("a new client resumes with the resumption token and gets the rest once, in order", async () => {
        const first = await client();
        const call = callSteps(first, { run: "b", count: 8, pauseAfter: 3, holdResult: true });
        await waitFor(() => first.notes.length === 3, "the first three steps");
        const sessionId = first.sessionId;
        const token = call.tokens[call.tokens.length - 1] ?? "";
        await first.closeTransport();
        await waitFor(() => mcp.cutResponses === 1, "the server to see the client go");
        mcp.gate("b:mid").open();
        await waitFor(() => mcp.sent.get("b") === 8, "the tool to send every step");
        mcp.gate("b:end").open();

        const second = await client(sessionId);
        const resumed = callSteps(second, { run: "b", count: 8 }, { resumptionToken: token });
        assert.deepEqual(await resumed.outcome, { kind: "result", text: "b done" });
        assert.deepEqual([...first.notes, ...second.notes], steps("b", 1, 8));
        assert.equal(mcp.sent.get("b"), 8, "the tool ran once");
      });

      it("a resume from the last event of a finished stream ends at once, with nothing sent", async () => {
        const c = await client();
        const call = callSteps(c, { run: "f", count: 2 });
        assert.deepEqual(await call.outcome, { kind: "result", text: "f done" });
        const last = call.tokens[call.tokens.length - 1] ?? "";
        assert.match(last, /^[A-Za-z0-9_-]+:\d+$/);

        const response = await fetch(mcp.url, {
          headers: {
            accept: "text/event-stream",
            "last-event-id": last,
            "mcp-session-id": c.sessionId ?? "",
            "mcp-protocol-version": "2025-11-25",
          },
        });
        assert.equal(response.status, 200);
        const body = await bodyWithin(response, 10_000);
        assert.notEqual(body, undefined, "the response never ended");
        assert.doesNotMatch(body ?? "", /^data: \S/m, "something was sent");
        assert.deepEqual([mcp.stores[0]?.stats.resumed, mcp.stores[0]?.stats.refused], [1, 0]);
      });

      it("a superseded token fails the call with -32010 and the request's own id, within seconds", async () => {
        const c = await client();
        const call = callSteps(c, { run: "s", count: 6, pauseAfter: 3, holdResult: true });
        await waitFor(() => c.notes.length === 3, "the first three steps");
        const lastId = call.tokens[call.tokens.length - 1] ?? "";
        const stream = (await log.resume(lastId)).streamId ?? "";
        await log.openGeneration(stream, { reason: "reset" }); // an operator, or a failover
        c.cutter.cut();

        const { ms, value } = await timed(call.outcome);
        assert.deepEqual(refusal(value ?? { kind: "timeout" }), {
          verdict: "reset",
          reason: "superseded",
        });
        assert.ok(ms < 20_000, `refused after ${ms} ms`);
        assert.deepEqual(c.notes, steps("s", 1, 3), "nothing was spliced in");
        mcp.gate("s:mid").open();
        mcp.gate("s:end").open();
      });

      it("per event: a resume across a message the service could not store is refused, never answered with a gap", async () => {
        await perEvent();
        const c = await client();
        const call = callSteps(c, { run: "g", count: 6, pauseAfter: 3, holdResult: true });
        await waitFor(() => c.notes.length === 3, "the first three steps");
        c.cutter.holdResumes = new Gate();
        c.cutter.cut();
        await waitFor(() => mcp.cutResponses === 1, "the server to see the cut");
        await proxy.down();
        mcp.gate("g:mid").open();
        await waitFor(() => mcp.sent.get("g") === 6, "the tool to send every step");
        await proxy.up();
        c.cutter.holdResumes.open();

        const outcome = await call.outcome;
        assert.deepEqual(refusal(outcome), { verdict: "reset", reason: "not_stored" });
        assert.ok(outcome.kind === "error");
        assert.equal(
          (outcome.data as { detail: string }).detail,
          "a message of this stream after the id could not be stored",
        );
        assert.deepEqual(c.notes, steps("g", 1, 3));
        assert.ok((mcp.stores[0]?.stats.storeFailures ?? 0) >= 3);
        mcp.gate("g:end").open();
      });

      it("per event: the service unreachable mid-call: every message still goes out live, and the session keeps serving", async () => {
        await perEvent();
        const c = await client();
        const call = callSteps(c, { run: "u", count: 10, pauseAfter: 5 });
        await waitFor(() => c.notes.length === 5, "the first five steps");
        await proxy.down();
        try {
          mcp.gate("u:mid").open();
          assert.deepEqual(await call.outcome, { kind: "result", text: "u done" });
          assert.deepEqual(c.notes, steps("u", 1, 10));
          const store = mcp.stores[0];
          assert.ok(
            (store?.stats.storeFailures ?? 0) >= 6,
            "steps 6..10 and the result went out unstored",
          );
          assert.ok(mcp.logbook.has("warn", /went out unstored/));

          const again = callSteps(c, { run: "u2", count: 2 });
          assert.deepEqual(await again.outcome, { kind: "result", text: "u2 done" });
          assert.ok(again.tokens.every((t) => t.startsWith(UNSTORED_PREFIX)));
        } finally {
          await proxy.up();
        }
        // The service is back: after the pause, calls are stored (and resumable) again.
        let stored = false;
        for (let i = 0; !stored; i += 1) {
          assert.ok(i < 200, "calls never got stored again");
          const later = callSteps(c, { run: `u-back-${i}`, count: 1 });
          await later.outcome;
          stored =
            later.tokens.length > 0 && later.tokens.every((t) => !t.startsWith(UNSTORED_PREFIX));
        }
        assert.deepEqual(mcp.transportErrors, []);
      });

      it("pipelined: the service away for a moment mid-call, the store catches up and the resume gets every message once", async () => {
        const c = await client();
        const call = callSteps(c, { run: "k", count: 6, pauseAfter: 3, holdResult: true });
        await waitFor(() => c.notes.length === 3, "the first three steps");
        c.cutter.holdResumes = new Gate();
        c.cutter.cut();
        await waitFor(() => mcp.cutResponses === 1, "the server to see the cut");
        await proxy.down();
        mcp.gate("k:mid").open();
        await waitFor(() => mcp.sent.get("k") === 6, "the tool to send every step");
        assert.equal(mcp.stores[0]?.stats.storeFailures, 0, "the steps were handed out, not lost");
        await proxy.up();
        c.cutter.holdResumes.open();
        await waitFor(() => mcp.stores[0]?.stats.resumed === 1, "the resume");
        mcp.gate("k:end").open();
        assert.deepEqual(await call.outcome, { kind: "result", text: "k done" });
        assert.deepEqual(c.notes, steps("k", 1, 6));
        assert.deepEqual([mcp.stores[0]?.mode, mcp.stores[0]?.stats.lost], ["pipelined", 0]);
      });

      it("a tampered id on the client's own reconnection: refused without an id, heard in onerror", async () => {
        const c = await client();
        const call = callSteps(
          c,
          { run: "x", count: 4, pauseAfter: 2, holdResult: true },
          {
            timeout: 2_000,
          },
        );
        await waitFor(() => c.notes.length === 2, "the first two steps");
        c.cutter.rewrite = () => "AAAAAAAAAAAAAAAAAAAAAA:3";
        c.cutter.cut();
        await waitFor(
          () => mcp.transportErrors.some((e) => e instanceof ResumeRefused),
          "the refusal, reported to the transport's onerror",
        );
        const refused = mcp.transportErrors.find(
          (e): e is ResumeRefused => e instanceof ResumeRefused,
        );
        assert.deepEqual(
          [refused?.refusal.verdict, refused?.refusal.reason],
          ["invalid", "unknown_generation"],
        );
        await waitFor(
          () => c.errors.some((e) => e.message.includes(`"code":${RESUME_REFUSED}`)),
          "the refusal in the client's onerror",
        );
        // No client can tie an id-less error to a request on its own reconnection (only an
        // explicit resumption names the request): the call ends at its own timeout.
        assert.deepEqual(await call.outcome, { kind: "timeout" });
        assert.deepEqual(c.notes, steps("x", 1, 2));
        mcp.gate("x:mid").open();
        mcp.gate("x:end").open();
      });

      it("another session's token is refused, and nothing of that session is sent", async () => {
        const owner = await client();
        const call = callSteps(owner, { run: "o", count: 4, pauseAfter: 2, holdResult: true });
        await waitFor(() => owner.notes.length === 2, "the first two steps");
        const token = call.tokens[call.tokens.length - 1] ?? "";

        const thief = await client();
        const stolen = callSteps(
          thief,
          { run: "o", count: 4 },
          {
            resumptionToken: token,
            timeout: 2_000,
          },
        );
        const outcome = await stolen.outcome;
        if (clientSdk === "v2") {
          assert.deepEqual(refusal(outcome), { verdict: "invalid", reason: "cross_session" });
        } else {
          // SDK 1.x keeps the error's id on an explicit resumption: only onerror hears it.
          assert.deepEqual(outcome, { kind: "timeout" });
          assert.ok(thief.errors.some((e) => e.message.includes('"reason":"cross_session"')));
        }
        assert.deepEqual(thief.notes, []);

        mcp.gate("o:mid").open();
        mcp.gate("o:end").open();
        assert.deepEqual(await call.outcome, { kind: "result", text: "o done" });
        assert.deepEqual(owner.notes, steps("o", 1, 4));
      });

      it("five sessions cut off and resumed at once each get exactly their own messages", async () => {
        const sessions = await Promise.all([1, 2, 3, 4, 5].map(() => client()));
        const calls = sessions.map((c, i) =>
          callSteps(c, { run: `p${i}`, count: 8, pauseAfter: 4, holdResult: true }),
        );
        await waitFor(
          () => sessions.every((c) => c.notes.length === 4),
          "four steps in every session",
        );
        for (const c of sessions) c.cutter.cut();
        await waitFor(() => mcp.cutResponses === 5, "the server to see the cuts");
        sessions.forEach((_, i) => {
          mcp.gate(`p${i}:mid`).open();
          mcp.gate(`p${i}:end`).open();
        });
        const outcomes = await Promise.all(calls.map((call) => call.outcome));
        outcomes.forEach((outcome, i) => {
          assert.deepEqual(outcome, { kind: "result", text: `p${i} done` });
          assert.deepEqual(sessions[i]?.notes, steps(`p${i}`, 1, 8));
        });
        assert.equal(new Set(mcp.stores.map((s) => s.scope)).size, 5);
      });

      it("a tool result of several MiB is stored (in parts) and delivered", async () => {
        const c = await client();
        const outcome = await c.call("big", { size: 3 * 1_048_576 });
        assert.equal(outcome.kind === "result" ? outcome.text.length : -1, (3 * 1_048_576) / 2);
        assert.equal(mcp.stores[0]?.stats.storeFailures, 0);
      });
    },
  );
}
