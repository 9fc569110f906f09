/**
 * `TaskClient` and `TaskRunner` against a real service process: every call, each refusal as
 * its class, the runner's outcomes (completed, failed, cancelled, stopped, input rounds, a
 * silent task kept alive past three leases) and a task created through one service process
 * and read through another on the same database; on SQLite and PostgreSQL.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  BeyondTail,
  InvalidTransition,
  isWorkerLost,
  type LiveEvent,
  Superseded,
  TaskClient,
  TaskFailed,
  type TaskRun,
  TaskRunner,
  TerminalGeneration,
  toMcpTask,
  UnknownAttempt,
  UnknownTask,
  ValidationFailed,
} from "../src/index.js";
import { BACKENDS, postgresSkip, type Service, startService } from "./support/service.js";

const RESULT = { content: [{ type: "text", text: "done" }], isError: false };
const ASKS = { name: { method: "elicitation/create", params: { message: "your name?" } } };
const FAST_RETRY = { attempts: 4, baseDelayMs: 5, maxDelayMs: 50 };

let service: Service;
let replica: Service;

function client(baseUrl = service.url): TaskClient {
  return new TaskClient({ baseUrl, retry: FAST_RETRY, timeoutMs: 10_000 });
}

async function rejects<T extends Error>(
  call: Promise<unknown>,
  cls: abstract new (...args: never[]) => T,
): Promise<T> {
  try {
    await call;
  } catch (error) {
    assert.ok(error instanceof cls, `expected ${cls.name}, got ${String(error)}`);
    return error;
  }
  assert.fail(`expected ${cls.name}, nothing was thrown`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const backend of BACKENDS) {
  describe(
    `tasks on ${backend}`,
    { skip: backend === "postgresql" ? await postgresSkip() : false },
    () => {
      before(async () => {
        // A quick sweep, so a lapsed lease is settled within a second of lapsing.
        const env = { EVENTLOG_LEASE_SWEEP_SECONDS: "0.5" };
        service = await startService(backend, { env });
        replica = await startService(backend, { replicaOf: service, env });
      });

      after(async () => {
        await replica?.stop();
        await service?.stop();
      });

      describe("TaskClient", () => {
        it("creates, gets and settles a task, and shows it as MCP does", async () => {
          const tasks = client();
          const task = await tasks.create({
            principal: "alice",
            ttlMs: 60_000,
            pollIntervalMs: 250,
            request: { name: "x" },
          });
          assert.deepEqual(
            [task.status, task.attempt, task.ttlMs, task.pollIntervalMs],
            ["working", 1, 60_000, 250],
          );
          assert.notEqual(task.leaseExpiresAt, null);
          const seen = await tasks.get(task.taskId, { principal: "alice" });
          assert.equal(seen.generation, task.generation);
          const done = await tasks.setStatus(task.taskId, 1, "completed", {
            statusMessage: "ok",
            result: RESULT,
          });
          assert.deepEqual(
            [done.status, done.result, done.leaseExpiresAt],
            ["completed", RESULT, null],
          );
          const shown = toMcpTask(done);
          assert.deepEqual(
            [
              shown["taskId"],
              shown["status"],
              shown["result"],
              shown["ttlMs"],
              shown["statusMessage"],
            ],
            [task.taskId, "completed", RESULT, 60_000, "ok"],
          );
        });

        it("renews, appends, pages, long-polls and follows the task's events", async () => {
          const tasks = client();
          const task = await tasks.create();
          const renewed = await tasks.renew(task.taskId, 1, { statusMessage: "halfway" });
          assert.equal(renewed.statusMessage, "halfway");
          const events = [{ data: '{"progress":1}', event: "progress" }, { data: "two" }];
          const appended = await tasks.append(task.taskId, 1, events, { firstSeq: 1 });
          assert.deepEqual(appended.eventIds, [`${task.generation}:1`, `${task.generation}:2`]);
          assert.equal(
            (await tasks.append(task.taskId, 1, events, { firstSeq: 1 })).duplicate,
            true,
          );
          const page = await tasks.events(task.taskId);
          assert.deepEqual(
            page.events.map((e) => [e.seq, e.event, e.data]),
            [
              [1, "progress", '{"progress":1}'],
              [2, null, "two"],
            ],
          );
          assert.deepEqual([page.attempt, page.terminal, page.superseded], [1, false, false]);
          await rejects(tasks.events(task.taskId, { after: 9 }), BeyondTail);

          const waiting = tasks.events(task.taskId, { after: 2, wait: 5 });
          await sleep(200);
          await tasks.append(task.taskId, 1, [{ data: "three" }]);
          assert.deepEqual(
            (await waiting).events.map((e) => e.data),
            ["three"],
          );

          await tasks.setStatus(task.taskId, 1, "completed", { result: RESULT });
          const seen: LiveEvent[] = [];
          for await (const item of tasks.follow(task.taskId)) seen.push(item);
          assert.deepEqual(
            seen.flatMap((i) => (i.kind === "event" ? [i.data] : [])),
            ['{"progress":1}', "two", "three"],
          );
          assert.equal(seen.at(-1)?.kind, "end");
        });

        it("answers input, takes over and cancels", async () => {
          const tasks = client();
          const task = await tasks.create({ principal: "bob" });
          const waiting = await tasks.setStatus(task.taskId, 1, "input_required", {
            inputRequests: ASKS,
          });
          assert.deepEqual(toMcpTask(waiting)["inputRequests"], ASKS);
          const answered = await tasks.answer(
            task.taskId,
            { name: { action: "accept" }, other: 1 },
            { principal: "bob" },
          );
          assert.deepEqual(answered.accepted, ["name"]);
          assert.deepEqual(toMcpTask(answered.task)["inputRequests"], {});

          const newer = await tasks.takeOver(task.taskId, 1, { producer: "second" });
          assert.deepEqual([newer.attempt, newer.status], [2, "input_required"]);
          await rejects(tasks.renew(task.taskId, 1), Superseded);
          await rejects(tasks.takeOver(task.taskId, 1), Superseded);

          const cancelled = await tasks.cancel(task.taskId, { principal: "bob" });
          assert.deepEqual([cancelled.status, cancelled.cancelRequested], ["cancelled", true]);
          await rejects(
            tasks.setStatus(task.taskId, 2, "completed", { result: RESULT }),
            TerminalGeneration,
          );
          await rejects(
            tasks.answer(task.taskId, { name: 1 }, { principal: "bob" }),
            TerminalGeneration,
          );
        });

        it("throws the client's classes by code", async () => {
          const tasks = client();
          const task = await tasks.create({ principal: "carol" });
          const foreign = await rejects(
            tasks.get(task.taskId, { principal: "mallory" }),
            UnknownTask,
          );
          const never = await rejects(
            tasks.get("A".repeat(22), { principal: "mallory" }),
            UnknownTask,
          );
          assert.deepEqual([foreign.status, foreign.detail], [404, never.detail]);
          await rejects(tasks.renew(task.taskId, 7), UnknownAttempt);
          await rejects(tasks.setStatus(task.taskId, 1, "working"), InvalidTransition);
          await rejects(tasks.setStatus(task.taskId, 1, "completed"), ValidationFailed);
          await rejects(tasks.cancel("B".repeat(22)), UnknownTask);
        });

        it("reads through one service process a task created through another", async () => {
          const created = await client(service.url).create({ principal: "gina" });
          const seen = await client(replica.url).get(created.taskId, { principal: "gina" });
          assert.deepEqual([seen.taskId, seen.attempt], [created.taskId, 1]);
          await client(replica.url).setStatus(created.taskId, 1, "completed", { result: RESULT });
          assert.equal(
            (await client(service.url).get(created.taskId, { principal: "gina" })).status,
            "completed",
          );
        });
      });

      describe("TaskRunner", () => {
        it("completes with the result and records progress", async () => {
          const tasks = client();
          const runner = new TaskRunner(tasks, { leaseSeconds: 5 });
          const started = await runner.start(
            async (run: TaskRun) => {
              await run.progress({ progress: 1, total: 2 });
              await run.say("half");
              await run.progress({ progress: 2, total: 2 });
              return RESULT;
            },
            { principal: "dave" },
          );
          // Durable before start() resolved: another service process finds it.
          assert.equal(
            (await client(replica.url).get(started.task.taskId, { principal: "dave" })).attempt,
            1,
          );
          const settled = await started.settled;
          assert.deepEqual([settled.status, settled.result], ["completed", RESULT]);
          const page = await tasks.events(settled.taskId, { principal: "dave" });
          assert.deepEqual(
            page.events.map((e) => (JSON.parse(e.data) as { progress: number }).progress),
            [1, 2],
          );
        });

        it("fails a task whose function throws", async () => {
          const runner = new TaskRunner(client(), { leaseSeconds: 5 });
          const refused = await runner.run(async () => {
            throw new TaskFailed(-32602, "bad arguments", { field: "x" });
          });
          assert.deepEqual(
            [refused.status, refused.error],
            ["failed", { code: -32602, message: "bad arguments", data: { field: "x" } }],
          );
          const crashed = await runner.run(async () => {
            throw new Error("disk on fire");
          });
          assert.deepEqual(
            [crashed.status, crashed.error],
            ["failed", { code: -32603, message: "disk on fire" }],
          );
          const nonsense = await runner.run(async () => 42);
          assert.equal(nonsense.status, "failed");
        });

        it("stops the function when the task is cancelled, and the task stays cancelled", async () => {
          const tasks = client();
          const runner = new TaskRunner(tasks, { leaseSeconds: 3, renewEveryMs: 200 });
          let aborted = false;
          const started = await runner.start(
            (run) =>
              new Promise((resolve) => {
                run.signal.addEventListener("abort", () => {
                  aborted = true;
                });
                setTimeout(() => resolve(RESULT), 60_000).unref();
              }),
            { principal: "erin" },
          );
          await tasks.cancel(started.task.taskId, { principal: "erin" });
          const settled = await started.settled;
          assert.ok(aborted, "the heartbeat's 409 terminal aborted run.signal");
          assert.deepEqual(
            [settled.status, settled.cancelRequested, settled.result],
            ["cancelled", true, null],
          );
        });

        it("settles its tasks failed when it is closed", async () => {
          const tasks = client();
          const runner = new TaskRunner(tasks, { leaseSeconds: 5 });
          const started = await runner.start(
            () => new Promise((resolve) => setTimeout(() => resolve(RESULT), 60_000).unref()),
          );
          await runner.close();
          const task = await tasks.get(started.task.taskId);
          assert.equal(task.status, "failed");
          assert.deepEqual(task.error?.["data"], { reason: "worker_stopped" });
        });

        it("runs an input round", async () => {
          const tasks = client();
          const runner = new TaskRunner(tasks, { leaseSeconds: 5, pollMs: 50 });
          const started = await runner.start(
            async (run) => {
              const answers = await run.ask(ASKS, { statusMessage: "who are you?" });
              const name = (answers["name"] as { content: { name: string } }).content.name;
              return { content: [{ type: "text", text: `hello ${name}` }], isError: false };
            },
            { principal: "frank" },
          );
          let task = await tasks.get(started.task.taskId, { principal: "frank" });
          for (let i = 0; i < 100 && task.status !== "input_required"; i += 1) {
            await sleep(50);
            task = await tasks.get(started.task.taskId, { principal: "frank" });
          }
          assert.deepEqual(toMcpTask(task)["inputRequests"], ASKS);
          await tasks.answer(
            task.taskId,
            { name: { action: "accept", content: { name: "Ann" } } },
            { principal: "frank" },
          );
          const settled = await started.settled;
          assert.equal(settled.status, "completed");
          assert.deepEqual(settled.result?.["content"], [{ type: "text", text: "hello Ann" }]);
        });

        it("keeps a silent task alive past three leases (and only the heartbeat does)", async () => {
          const tasks = client();
          const lease = 1;
          const runner = new TaskRunner(tasks, { leaseSeconds: lease });
          // The control: the same lease and nobody renewing it is failed worker_lost.
          const unattended = await tasks.create({ leaseSeconds: lease });
          const settled = await runner.run(async () => {
            await sleep(3500 * lease);
            return RESULT;
          });
          assert.deepEqual([settled.status, settled.result], ["completed", RESULT]);
          const lost = await tasks.get(unattended.taskId);
          assert.deepEqual([lost.status, isWorkerLost(lost)], ["failed", true]);
        });
      });
    },
  );
}
