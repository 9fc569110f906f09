/**
 * The pipelined store (the default) and writer leases, against a real service process on
 * SQLite and PostgreSQL: ids go out before the service acknowledges them, within the
 * declared window; a flaky channel loses nothing and stores nothing twice; a writer killed
 * mid-pipeline leaves claims the service answers `reset` (`lost_tail`, `abandoned`), never
 * `invalid`; a live writer keeps its silent generations from being abandoned.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { afterEach, describe, it } from "node:test";

import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

import { AppendChannel, RESUME_REFUSED, UNSTORED_PREFIX } from "../src/index.js";
import { Logbook } from "./support/mcp.js";
import { proxiedService } from "./support/proxied.js";
import { BACKENDS, postgresSkip } from "./support/service.js";
import { waitFor } from "./support/wait.js";

function note(i: number): JSONRPCMessage {
  return {
    jsonrpc: "2.0",
    method: "notifications/progress",
    params: { progressToken: 1, progress: i, message: `step ${i}` },
  };
}

const seqOf = (id: string): number => Number(id.slice(id.lastIndexOf(":") + 1));
const tokenOf = (id: string): string => id.slice(0, id.lastIndexOf(":"));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolve once `check()` holds (asked every 100 ms); reject after `timeoutMs`. */
async function until(
  check: () => Promise<boolean>,
  what: string,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** Whether `promise` is still pending after `ms`. */
async function pendingAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const marker = Symbol("pending");
  const first = await Promise.race([promise, sleep(ms).then(() => marker)]);
  return first === marker;
}

for (const backend of BACKENDS) {
  describe(
    `pipelined EventLogEventStore and writer leases on ${backend}`,
    { skip: backend === "postgresql" ? await postgresSkip() : false },
    () => {
      const on = proxiedService(backend);
      const store = on.store;

      afterEach(() => {
        on.proxy.releaseProducerFrames();
        AppendChannel.closeShared();
      });

      /** Every stored message of `token`'s generation, in seq order, from seq 1. */
      async function storedOf(token: string): Promise<string[]> {
        const data: string[] = [];
        for await (const e of on.log.eventsAfter(token, 0)) data.push(e.data);
        return data;
      }

      it("ids go out before the service answers, at most the window ahead; a replay in the process waits for them", async () => {
        const s = store({ pipeline: 8 });
        const first = await s.storeEvent("w", note(1));
        assert.equal(s.mode, "pipelined");
        assert.ok(await s.flush());
        on.proxy.holdProducerFrames = true;
        const shown = [first];
        for (let i = 2; i <= 9; i += 1) shown.push(await s.storeEvent("w", note(i)));
        // Nothing of 2..9 reached the service: the window (8) is full, the next write waits.
        const tenth = s.storeEvent("w", note(10));
        assert.ok(await pendingAfter(tenth, 300), "the write past the window did not wait");
        assert.equal((await on.log.page(tokenOf(first))).tailSeq, 1);
        const replayed: string[] = [];
        const replay = s.replayEventsAfter(shown[1] ?? "", {
          send: async (id) => void replayed.push(id),
        });
        assert.ok(
          await pendingAfter(replay, 200),
          "the replay did not wait for the acknowledgements",
        );
        on.proxy.releaseProducerFrames();
        shown.push(await tenth);
        assert.equal(await replay, "w");
        assert.deepEqual(
          shown,
          Array.from({ length: 10 }, (_, i) => `${tokenOf(first)}:${i + 1}`),
        );
        // The tenth write held the stream when the replay came: the replay follows it.
        assert.deepEqual(replayed, shown.slice(2), "3..10, each once, in order");
        assert.ok(await s.flush());
        const stored = await storedOf(tokenOf(first));
        assert.deepEqual(
          stored.map((d) => (JSON.parse(d) as { params: { progress: number } }).params.progress),
          Array.from({ length: 10 }, (_, i) => i + 1),
        );
        const pipe = s.pipelineOf("w");
        assert.ok(pipe !== undefined && pipe.frames < 10, `${pipe?.frames} frames for 10 messages`);
        assert.deepEqual([s.stats.stored, s.stats.lost, s.stats.storeFailures], [10, 0, 0]);
      });

      it("a flaky channel, dropped every 5 frames: every message stored once, in order", async () => {
        const s = store({ pipeline: 16 });
        const count = 300;
        let drops = 0;
        let next = 5;
        const ids: string[] = [];
        for (let i = 1; i <= count; i += 1) {
          ids.push(await s.storeEvent("flaky", note(i)));
          const answered = s.channel?.counts.answered ?? 0;
          if (answered >= next) {
            on.proxy.dropChannels();
            drops += 1;
            next = answered + 5;
          }
          // Let the channel reopen now and then, so drops land mid-pipeline rather than
          // all before the first answer.
          if (i % 25 === 0) await sleep(5);
        }
        assert.ok(await s.flush(20_000), "not every message was acknowledged");
        const token = tokenOf(ids[0] ?? "");
        assert.ok(ids.every((id, i) => id === `${token}:${i + 1}`));
        const stored = await storedOf(token);
        assert.deepEqual(
          stored.map((d) => (JSON.parse(d) as { params: { progress: number } }).params.progress),
          Array.from({ length: count }, (_, i) => i + 1),
        );
        assert.ok(drops >= 3, `only ${drops} drops`);
        assert.ok((s.channel?.counts.opened ?? 0) >= 3, "the channel was not reopened");
        assert.deepEqual([s.stats.lost, s.stats.storeFailures], [0, 0]);
      });

      it("a service that reads nothing: the window fills, the next message goes out unstored, and no resume crosses the lost ones", async () => {
        const logbook = new Logbook();
        const s = store({ pipeline: 4, storeTimeoutMs: 800, logger: logbook });
        const first = await s.storeEvent("silent", note(1));
        assert.ok(await s.flush());
        on.proxy.holdProducerFrames = true;
        const shown: string[] = [];
        for (let i = 2; i <= 5; i += 1) shown.push(await s.storeEvent("silent", note(i)));
        const unstored = await s.storeEvent("silent", note(6));
        assert.ok(unstored.startsWith(UNSTORED_PREFIX), unstored);
        assert.equal(s.stats.lost, 4);
        assert.ok(
          logbook.has("warn", /4 message\(s\) of SDK stream silent went out and were not stored/),
        );
        on.proxy.releaseProducerFrames();
        const sent: JSONRPCMessage[] = [];
        await s.replayEventsAfter(first, {
          send: async (_id, m) => void sent.push(m as JSONRPCMessage),
        });
        assert.equal(sent.length, 1);
        const refusal = sent[0];
        assert.ok(refusal !== undefined && "error" in refusal);
        assert.equal(refusal.error.code, RESUME_REFUSED);
        assert.deepEqual(
          [(refusal.error.data as { reason: string }).reason, s.stats.resumed],
          ["not_stored", 0],
        );
        await sleep(1_000); // past the pause after the failure
        const later = await s.storeEvent("silent", note(7));
        assert.notEqual(tokenOf(later), tokenOf(first), "a new generation after the loss");
        assert.equal(seqOf(later), 1);
        for (const id of [first, ...shown]) {
          const answer = await on.log.resume(id);
          assert.notEqual(answer.verdict, "invalid", `${id}: ${answer.reason}`);
          assert.equal(answer.verdict, "reset", `${id}: ${answer.reason}`);
        }
      });

      it("a generation fenced by someone else: the ids it had shown reset, the next message continues in a new one", async () => {
        const s = store();
        const first = await s.storeEvent("f", note(1));
        assert.ok(await s.flush());
        await on.log.openGeneration(`mcp.${s.scope}.f`);
        const shown = await s.storeEvent("f", note(2));
        assert.equal(tokenOf(shown), tokenOf(first), "shown before the service answered");
        assert.equal(await s.flush(), false, "the fenced generation refused it");
        assert.equal(s.stats.lost, 1);
        const next = await s.storeEvent("f", note(3));
        assert.notEqual(tokenOf(next), tokenOf(first));
        assert.equal(seqOf(next), 1);
        const answer = await on.log.resume(shown);
        assert.deepEqual([answer.verdict, answer.reason], ["reset", "superseded"]);
      });

      for (const [transport, durability] of [
        ["channel", "pipelined"],
        ["rest", "per_event"],
      ] as const) {
        it(`an idle generation whose writer lives is never abandoned (3 leases; renewed over ${transport}, ${durability}); once the writer lets go, it is`, async () => {
          const s = store({ leaseSeconds: 1, appendTransport: transport, durability });
          const id = await s.storeEvent("idle", note(1));
          assert.ok(await s.flush());
          await sleep(3_500);
          const alive = await on.log.resume(id);
          assert.deepEqual([alive.verdict, alive.reason], ["resume", "ok"]);
          const name = `mcp.${s.scope}.idle`;
          assert.equal((await on.log.stream(name)).current?.abandonedAt, null);

          await s.close();
          await until(
            async () => (await on.log.stream(name)).current?.abandonedAt != null,
            "the generation to be abandoned after the lease and the sweep",
            10_000,
          );
          const gone = await on.log.resume(id);
          assert.deepEqual([gone.verdict, gone.reason], ["reset", "abandoned"]);
          if (transport === "rest") assert.equal(s.channel, undefined);
        });
      }

      it("a writer killed (-9) mid-pipeline: every id it showed resets (lost_tail or abandoned), never invalid", async () => {
        const index = new URL("../src/index.js", import.meta.url).href;
        const program =
          `import { EventLogEventStore } from ${JSON.stringify(index)};\n` +
          `const quiet = { info() {}, warn() {}, error() {} };\n` +
          `const s = new EventLogEventStore({ baseUrl: ${JSON.stringify(on.proxy.url)}, ` +
          `pipeline: 16, leaseSeconds: 2, storeTimeoutMs: 600000, logger: quiet });\n` +
          `for (let i = 1; ; i += 1) {\n` +
          `  const id = await s.storeEvent("k", { jsonrpc: "2.0", method: "m", params: { i } });\n` +
          `  process.stdout.write(id + "\\n");\n` +
          `}\n`;
        const child = spawn(process.execPath, ["--input-type=module", "-e", program]);
        const shown: string[] = [];
        let buffered = "";
        child.stdout.on("data", (chunk: Buffer) => {
          buffered += chunk.toString();
          const lines = buffered.split("\n");
          buffered = lines.pop() ?? "";
          shown.push(...lines.filter((l) => l.length > 0));
        });
        let stderr = "";
        child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
        const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
        try {
          await waitFor(() => shown.length >= 30, `the writer to show 30 ids (${stderr})`, 30_000);
          on.proxy.holdProducerFrames = true;
          // The window fills with ids the service never gets; then the writer waits.
          let seen = -1;
          while (seen !== shown.length) {
            seen = shown.length;
            await sleep(500);
          }
        } finally {
          child.kill("SIGKILL");
          await exited;
        }
        // What the dead writer had sent and the service never read dies with its connection.
        on.proxy.dropChannels();
        on.proxy.releaseProducerFrames();
        assert.ok(
          shown.every((id) => !id.startsWith(UNSTORED_PREFIX)),
          shown.join(" "),
        );
        const last = shown[shown.length - 1] ?? "";
        const token = tokenOf(last);
        const tail = (await on.log.page(token)).tailSeq;
        assert.ok(seqOf(last) > tail, `the kill left nothing unstored (${last}, tail ${tail})`);
        assert.ok(seqOf(last) - tail <= 16, "shown past the window");

        const right = await on.log.resume(last);
        assert.equal(right.verdict, "reset", `${last}: ${right.verdict}/${right.reason}`);
        assert.ok(["lost_tail", "abandoned"].includes(right.reason), right.reason);
        const name = right.streamId ?? "";
        await until(
          async () => (await on.log.stream(name)).current?.abandonedAt != null,
          "the dead writer's generation to be abandoned",
          15_000,
        );
        for (const id of shown) {
          const answer = await on.log.resume(id);
          assert.deepEqual(
            [answer.verdict, answer.reason, answer.events.length],
            ["reset", "abandoned", 0],
            id,
          );
        }
      });
    },
  );
}
