/**
 * End to end with the real TypeScript SDK (1.32.2): McpServer + StreamableHTTPServerTransport
 * with one EventLogEventStore per session, SDK clients over HTTP, a real service process on
 * SQLite and on PostgreSQL, and a proxy between the store and the service to take it away.
 */

import assert from "node:assert/strict";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";

import { CallToolResultSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

import { EventLogClient, RESUME_REFUSED, ResumeRefused, UNSTORED_PREFIX } from "../src/index.js";
import { connectClient, McpFixture, steps, type TestClient } from "./support/mcp.js";
import { FaultyProxy } from "./support/proxy.js";
import { BACKENDS, postgresSkip, type Service, startService } from "./support/service.js";
import { Gate, timed, waitFor } from "./support/wait.js";

/** Long enough never to be what ends a call in these tests: a refusal must come first. */
const CALL_TIMEOUT_MS = 60_000;

interface Call {
  readonly result: Promise<unknown>;
  readonly tokens: string[];
}

function callSteps(
  c: TestClient,
  args: { run: string; count: number; pauseAfter?: number; holdResult?: boolean },
  timeout = CALL_TIMEOUT_MS,
): Call {
  const tokens: string[] = [];
  const result = c.client.callTool({ name: "steps", arguments: args }, CallToolResultSchema, {
    timeout,
    onresumptiontoken: (token) => tokens.push(token),
  });
  result.catch(() => undefined); // awaited by the test; never an unhandled rejection meanwhile
  return { result, tokens };
}

function text(result: unknown): string {
  const parsed = CallToolResultSchema.parse(result);
  const first = parsed.content[0];
  return first?.type === "text" ? first.text : "";
}

async function refusalOf(promise: Promise<unknown>): Promise<McpError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof McpError, `not an McpError: ${String(error)}`);
    return error;
  }
  assert.fail("the call was not refused");
}

for (const backend of BACKENDS) {
  describe(
    `the TypeScript SDK with EventLogEventStore on ${backend}`,
    { skip: backend === "postgresql" ? await postgresSkip() : false },
    () => {
      let service: Service;
      let proxy: FaultyProxy;
      let mcp: McpFixture;
      let log: EventLogClient;
      const clients: TestClient[] = [];

      async function client(sessionId?: string): Promise<TestClient> {
        const c = await connectClient(mcp.url, sessionId);
        clients.push(c);
        return c;
      }

      before(async () => {
        service = await startService(backend);
        proxy = await FaultyProxy.start(service.url);
        log = new EventLogClient({ baseUrl: service.url });
      });

      beforeEach(async () => {
        mcp = await McpFixture.start({
          baseUrl: proxy.url,
          retry: { attempts: 2, baseDelayMs: 5, maxDelayMs: 50 },
          pauseAfterFailureMs: 200,
        });
      });

      afterEach(async () => {
        for (const c of clients.splice(0)) await c.client.close();
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

        assert.equal(text(await call.result), "a done");
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
        const sessionId = first.transport.sessionId;
        const token = call.tokens[call.tokens.length - 1] ?? "";
        await first.transport.close();
        await waitFor(() => mcp.cutResponses === 1, "the server to see the client go");
        mcp.gate("b:mid").open();
        await waitFor(() => mcp.sent.get("b") === 8, "the tool to send every step");
        mcp.gate("b:end").open();

        const second = await client(sessionId);
        const resumed = second.client.request(
          { method: "tools/call", params: { name: "steps", arguments: { run: "b", count: 8 } } },
          CallToolResultSchema,
          { resumptionToken: token, timeout: CALL_TIMEOUT_MS },
        );
        assert.equal(text(await resumed), "b done");
        assert.deepEqual([...first.notes, ...second.notes], steps("b", 1, 8));
        assert.equal(mcp.sent.get("b"), 8, "the tool ran once");
      });

      it("a superseded token fails the call with -32010 and the request's own id, within seconds", async () => {
        const c = await client();
        const call = callSteps(c, { run: "s", count: 6, pauseAfter: 3, holdResult: true });
        await waitFor(() => c.notes.length === 3, "the first three steps");
        const lastId = call.tokens[call.tokens.length - 1] ?? "";
        const stream = (await log.resume(lastId)).streamId ?? "";
        await log.openGeneration(stream, { reason: "reset" }); // an operator, or a failover
        c.cutter.cut();

        const { ms, error } = await timed(call.result);
        assert.ok(error instanceof McpError, `not refused: ${String(error)}`);
        assert.equal(error.code, RESUME_REFUSED);
        assert.deepEqual(
          [(error.data as { verdict: string }).verdict, (error.data as { reason: string }).reason],
          ["reset", "superseded"],
        );
        assert.ok(ms < 20_000, `refused after ${ms} ms`);
        assert.deepEqual(c.notes, steps("s", 1, 3), "nothing was spliced in");
        mcp.gate("s:mid").open();
        mcp.gate("s:end").open();
      });

      it("an explicit resumption of a superseded token: the refusal reaches the new client at once", async () => {
        const first = await client();
        const call = callSteps(first, { run: "e", count: 4, pauseAfter: 2, holdResult: true });
        await waitFor(() => first.notes.length === 2, "the first two steps");
        const sessionId = first.transport.sessionId;
        const token = call.tokens[call.tokens.length - 1] ?? "";
        await log.openGeneration((await log.resume(token)).streamId ?? "", { reason: "reset" });
        await first.transport.close();

        const second = await client(sessionId);
        const resumed = second.client.request(
          { method: "tools/call", params: { name: "steps", arguments: { run: "e", count: 4 } } },
          CallToolResultSchema,
          { resumptionToken: token, timeout: 4_000 },
        );
        resumed.catch(() => undefined);
        await waitFor(
          () =>
            second.errors.some(
              (e) =>
                e.message.includes(`"code":${RESUME_REFUSED}`) &&
                e.message.includes('"reason":"superseded"'),
            ),
          "the refusal to reach the client",
          10_000,
        );
        // The refusal carries the original request's id; SDK 1.32.2 rewrites only *result* ids
        // to the resuming request's (client/streamableHttp.js), so that request ends at its timeout.
        assert.equal((await refusalOf(resumed)).code, ErrorCode.RequestTimeout);
        assert.deepEqual(second.notes, [], "nothing was spliced in");
        mcp.gate("e:mid").open();
        mcp.gate("e:end").open();
      });

      it("a resume across a message the service could not store is refused, never answered with a gap", async () => {
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

        const error = await refusalOf(call.result);
        assert.equal(error.code, RESUME_REFUSED);
        assert.deepEqual(error.data, {
          verdict: "reset",
          reason: "not_stored",
          detail: "a message of this stream after the id could not be stored",
        });
        assert.deepEqual(c.notes, steps("g", 1, 3));
        assert.ok((mcp.stores[0]?.stats.storeFailures ?? 0) >= 3);
        mcp.gate("g:end").open();
      });

      it("the service unreachable mid-call: every message still goes out live, and the session keeps serving", async () => {
        const c = await client();
        const call = callSteps(c, { run: "u", count: 10, pauseAfter: 5 });
        await waitFor(() => c.notes.length === 5, "the first five steps");
        await proxy.down();
        try {
          mcp.gate("u:mid").open();
          assert.equal(text(await call.result), "u done");
          assert.deepEqual(c.notes, steps("u", 1, 10));
          const store = mcp.stores[0];
          assert.ok(
            (store?.stats.storeFailures ?? 0) >= 6,
            "steps 6..10 and the result went out unstored",
          );
          assert.ok(mcp.logbook.has("warn", /went out unstored/));

          const again = callSteps(c, { run: "u2", count: 2 });
          assert.equal(text(await again.result), "u2 done");
          assert.ok(again.tokens.every((t) => t.startsWith(UNSTORED_PREFIX)));
        } finally {
          await proxy.up();
        }
        // The service is back: after the pause, calls are stored (and resumable) again.
        let stored = false;
        for (let i = 0; !stored; i += 1) {
          assert.ok(i < 200, "calls never got stored again");
          const later = callSteps(c, { run: `u-back-${i}`, count: 1 });
          await later.result;
          stored =
            later.tokens.length > 0 && later.tokens.every((t) => !t.startsWith(UNSTORED_PREFIX));
        }
        assert.deepEqual(mcp.transportErrors, []);
      });

      it("an id the service does not know is refused: the client hears of it at once, and nothing is sent", async () => {
        const c = await client();
        const call = callSteps(c, { run: "x", count: 4, pauseAfter: 2, holdResult: true }, 4_000);
        await waitFor(() => c.notes.length === 2, "the first two steps");
        c.cutter.rewrite = () => "AAAAAAAAAAAAAAAAAAAAAA:3";
        c.cutter.cut();
        await waitFor(
          () => mcp.transportErrors.some((e) => e instanceof ResumeRefused),
          "the refusal",
        );
        const refused = mcp.transportErrors.find(
          (e): e is ResumeRefused => e instanceof ResumeRefused,
        );
        assert.deepEqual(
          [refused?.refusal.verdict, refused?.refusal.reason],
          ["invalid", "unknown_generation"],
        );
        await waitFor(
          () =>
            c.errors.some((e) =>
              /Failed to (re)?connect|Failed to open SSE stream/.test(e.message),
            ),
          "the client's onerror",
        );
        // SDK 1.32.2 cannot name a request from an unknown id: the call ends at its own timeout.
        assert.equal((await refusalOf(call.result)).code, ErrorCode.RequestTimeout);
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
        const stolen = thief.client.request(
          { method: "tools/call", params: { name: "steps", arguments: { run: "o", count: 4 } } },
          CallToolResultSchema,
          { resumptionToken: token, timeout: 4_000 },
        );
        stolen.catch(() => undefined);
        await waitFor(
          () => thief.errors.some((e) => /Failed to open SSE stream/.test(e.message)),
          "the thief's onerror",
        );
        const refused = mcp.transportErrors.find(
          (e): e is ResumeRefused => e instanceof ResumeRefused,
        );
        assert.deepEqual(
          [refused?.refusal.verdict, refused?.refusal.reason],
          ["invalid", "cross_session"],
        );
        assert.equal((await refusalOf(stolen)).code, ErrorCode.RequestTimeout);
        assert.deepEqual(thief.notes, []);

        mcp.gate("o:mid").open();
        mcp.gate("o:end").open();
        assert.equal(text(await call.result), "o done");
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
        const results = await Promise.all(calls.map((call) => call.result));
        results.forEach((result, i) => {
          assert.equal(text(result), `p${i} done`);
          assert.deepEqual(sessions[i]?.notes, steps(`p${i}`, 1, 8));
        });
        assert.equal(new Set(mcp.stores.map((s) => s.scope)).size, 5);
      });

      it("a tool result of several MiB is stored (in parts) and delivered", async () => {
        const c = await client();
        const result = await c.client.callTool({ name: "big", arguments: { size: 3 * 1_048_576 } });
        assert.equal(text(result).length, (3 * 1_048_576) / 2);
        const store = mcp.stores[0];
        assert.equal(store?.stats.storeFailures, 0);
      });
    },
  );
}
