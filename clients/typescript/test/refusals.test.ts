/**
 * Every refusal of the shared table, as a client that resumes a call with a token
 * (`resumptionToken`) meets it, with both client generations against both server
 * generations: the 2.x client's call fails with -32010 and the verdict at once; the 1.x
 * client keeps the error's id on an explicit resumption (a client bug, fixed in the 2.x
 * line), so only its `onerror` hears it and the call ends at its own timeout.
 *
 * On the wire the refusal carries the original request's id where the store can name it,
 * and no `id` member at all where it cannot (never `"id": null`).
 */

import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";

import {
  DEFAULT_PIPELINE,
  EventLogClient,
  type EventLogEventStoreOptions,
  RESUME_REFUSED,
} from "../src/index.js";
import {
  type CallOutcome,
  connectClient,
  McpFixture,
  type Sdk,
  type TestClient,
} from "./support/mcp.js";
import { type Service, startService } from "./support/service.js";
import { timed, waitFor } from "./support/wait.js";

/** What the owner of the call held, and the service to tamper with. */
interface Held {
  readonly tokens: readonly string[];
  readonly last: string;
  readonly log: EventLogClient;
  readonly service: Service;
}

interface Case {
  readonly verdict: string;
  readonly reason: string;
  /** The claim to resume from. */
  readonly claim: (held: Held) => Promise<string>;
  /** Whether the store can name the request (the claim is this session's own). */
  readonly named: boolean;
  /** A second session resumes, not the owner's. */
  readonly otherSession?: boolean;
  readonly store?: EventLogEventStoreOptions;
  /** The 1.x client's timeout, when the verdict takes longer than `V1_TIMEOUT_MS`. */
  readonly v1TimeoutMs?: number;
}

const seqOf = (id: string): number => Number(id.slice(id.lastIndexOf(":") + 1));
const tokenOf = (id: string): string => id.slice(0, id.lastIndexOf(":"));

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const CASES: readonly Case[] = [
  {
    verdict: "invalid",
    reason: "malformed_id",
    named: false,
    claim: async () => "not an event id",
  },
  {
    verdict: "invalid",
    reason: "unknown_generation",
    named: false,
    claim: async () => "AAAAAAAAAAAAAAAAAAAAAA:3",
  },
  {
    verdict: "invalid",
    reason: "cross_session",
    named: false,
    otherSession: true,
    claim: async ({ last }) => last,
  },
  {
    verdict: "invalid",
    reason: "beyond_tail",
    named: true,
    // Past the pipeline window the stores declare: within it, the claim is a lost tail.
    claim: async ({ last }) => `${tokenOf(last)}:${seqOf(last) + DEFAULT_PIPELINE + 50}`,
  },
  {
    // A claim past the tail, within the pipeline window: an id a pipelined writer may have
    // shown and not stored. The service waits for the tail to reach it, then resets.
    verdict: "reset",
    reason: "lost_tail",
    named: true,
    // The service waits EVENTLOG_RESUME_CATCHUP_MS (2 s) for the tail before it answers.
    v1TimeoutMs: 6_000,
    claim: async ({ last }) => `${tokenOf(last)}:${seqOf(last) + 3}`,
  },
  {
    verdict: "reset",
    reason: "superseded",
    named: true,
    claim: async ({ last, log }) => {
      await log.openGeneration((await log.resume(last)).streamId ?? "", { reason: "reset" });
      return last;
    },
  },
  {
    verdict: "reset",
    reason: "terminal",
    named: true,
    claim: async ({ last, service }) => {
      const url = `${service.url}/admin/v1/generations/${tokenOf(last)}/terminate`;
      assert.equal((await fetch(url, { method: "POST" })).status, 200);
      return last;
    },
  },
  {
    verdict: "reset",
    reason: "evicted",
    named: true,
    store: { maxEvents: 2 },
    claim: async ({ tokens }) => tokens[0] ?? "",
  },
  {
    verdict: "reset",
    reason: "expired",
    named: true,
    store: { ttlSeconds: 1 },
    claim: async ({ last, log }) => {
      await until("the generation to expire", async () => {
        return (await log.resume(last)).reason === "expired";
      });
      return last;
    },
  },
  {
    verdict: "reset",
    reason: "not_stored",
    named: false,
    claim: async () => "unstored:AAAAAAAAAAAAAAAAAAAAAA",
  },
];

const PAIRINGS: readonly { server: Sdk; client: Sdk }[] = [
  { server: "v2", client: "v2" },
  { server: "v1", client: "v2" },
  { server: "v1", client: "v1" },
];

/** The 1.x client's call ends at its timeout: short, so the table runs quickly. */
const V1_TIMEOUT_MS = 1_000;

/** The JSON-RPC messages of an SSE body. */
function messages(body: string): Record<string, unknown>[] {
  return body
    .split("\n")
    .filter((line) => line.startsWith("data: {"))
    .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>);
}

let service: Service;
let log: EventLogClient;
const seen: string[] = [];

before(async () => {
  service = await startService("sqlite", { env: { EVENTLOG_RETENTION_INTERVAL_SECONDS: "0.2" } });
  log = new EventLogClient({ baseUrl: service.url });
});

after(async () => {
  await service?.stop();
  console.log(["what each client saw:", ...seen].join("\n  "));
});

for (const { server, client: clientSdk } of PAIRINGS) {
  describe(`explicit resumption refused: SDK ${server} server, ${clientSdk} client`, () => {
    let mcp: McpFixture | undefined;
    const clients: TestClient[] = [];

    afterEach(async () => {
      for (const c of clients.splice(0)) await c.close();
      await mcp?.close();
    });

    for (const c of CASES) {
      it(`${c.verdict}/${c.reason}: ${clientSdk === "v2" ? "the call fails at once" : "only onerror hears it"}`, async () => {
        const fixture = await McpFixture.start({ baseUrl: service.url, ...c.store }, server);
        mcp = fixture;
        const connect = async (sessionId?: string): Promise<TestClient> => {
          const made = await connectClient(fixture.url, { sdk: clientSdk, sessionId });
          clients.push(made);
          return made;
        };
        const owner = await connect();
        const tokens: string[] = [];
        const run = `r-${c.reason}`;
        const original = owner.call(
          "steps",
          { run, count: 6, pauseAfter: 5, holdResult: true },
          { onresumptiontoken: (t) => tokens.push(t) },
        );
        await waitFor(() => owner.notes.length === 5, "the first five steps");
        const sessionId = owner.sessionId;
        await owner.closeTransport();
        await waitFor(() => fixture.cutResponses === 1, "the server to see the owner go");
        const held = { tokens, last: tokens[tokens.length - 1] ?? "", log, service };
        const claim = await c.claim(held);

        const resumer = await connect(c.otherSession ? undefined : sessionId);
        const timeout = clientSdk === "v2" ? 60_000 : (c.v1TimeoutMs ?? V1_TIMEOUT_MS);
        const { ms, value } = await timed(
          resumer.call("steps", { run, count: 6 }, { resumptionToken: claim, timeout }),
        );
        const outcome: CallOutcome = value ?? { kind: "timeout" };
        seen.push(
          `${server} server, ${clientSdk} client, ${c.verdict}/${c.reason}: ${outcome.kind} in ${ms} ms`,
        );

        const refusal = messages(resumer.cutter.resumeBodies.join("")).find((m) => "error" in m);
        assert.ok(refusal !== undefined, "no refusal on the wire");
        assert.deepEqual((refusal["error"] as { data: unknown }).data, {
          verdict: c.verdict,
          reason: c.reason,
          detail: (refusal["error"] as { data: { detail: string } }).data.detail,
        });
        if (c.named) assert.ok(["string", "number"].includes(typeof refusal["id"]), "no id");
        else assert.ok(!("id" in refusal), `an id where none can be named: ${refusal["id"]}`);

        if (clientSdk === "v2") {
          assert.equal(outcome.kind, "error", JSON.stringify(outcome));
          assert.ok(outcome.kind === "error");
          assert.equal(outcome.code, RESUME_REFUSED);
          const data = outcome.data as { verdict: string; reason: string };
          assert.deepEqual([data.verdict, data.reason], [c.verdict, c.reason]);
          assert.ok(ms < 10_000, `refused after ${ms} ms`);
        } else {
          assert.deepEqual(outcome, { kind: "timeout" });
          assert.ok(
            resumer.errors.some((e) => e.message.includes(`"reason":"${c.reason}"`)),
            `onerror did not hear it: ${resumer.errors.map((e) => e.message).join("; ")}`,
          );
        }
        assert.deepEqual(resumer.notes, [], "nothing was spliced in");
        fixture.gate(`${run}:mid`).open();
        fixture.gate(`${run}:end`).open();
        await original;
      });
    }
  });
}
