/**
 * `EventLogTaskStoreV1` as the `taskStore` of SDK 1.x servers (`@modelcontextprotocol/sdk`
 * 1.32.2, the experimental 2025-11-25 tasks), the task record in a real service process: a
 * task-augmented `tools/call` on one server, `tasks/get` and `tasks/result` (the SDK's own
 * handlers, reading the store) on another that shares only the log.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";

import { EventLogTaskStoreV1, isWorkerLost, TaskClient } from "../src/index.js";
import { type Service, startService } from "./support/service.js";

let service: Service;
const stores: EventLogTaskStoreV1[] = [];

before(async () => {
  service = await startService("sqlite", { env: { EVENTLOG_LEASE_SWEEP_SECONDS: "0.5" } });
});

after(async () => {
  for (const store of stores) store.close();
  await service?.stop();
});

function store(leaseSeconds = 5): EventLogTaskStoreV1 {
  const made = new EventLogTaskStoreV1(new TaskClient({ baseUrl: service.url }), { leaseSeconds });
  stores.push(made);
  return made;
}

/** One SDK 1.x server (a replica) with the store, and a client connected to it. */
async function replica(): Promise<Client> {
  const taskStore = store();
  const server = new McpServer(
    { name: "replica", version: "1.0.0" },
    { capabilities: { tasks: { requests: { tools: { call: {} } } } }, taskStore },
  );
  server.experimental.tasks.registerToolTask(
    "slow_compute",
    { execution: { taskSupport: "required" } },
    {
      createTask: async (extra) => {
        const task = await extra.taskStore.createTask({ ttl: 60_000, pollInterval: 50 });
        setTimeout(() => {
          void extra.taskStore.storeTaskResult(task.taskId, "completed", {
            content: [{ type: "text", text: "42" }],
          });
        }, 200);
        return { task };
      },
      getTask: async (extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (extra) =>
        (await extra.taskStore.getTaskResult(extra.taskId)) as {
          content: { type: "text"; text: string }[];
        },
    },
  );
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client(
    { name: "requester", version: "1.0.0" },
    { capabilities: { tasks: { requests: {} } } },
  );
  await client.connect(clientSide);
  return client;
}

describe("EventLogTaskStoreV1 under SDK 1.x servers", () => {
  it("a task made on one replica is read, with its result, on the other", async () => {
    const [one, two] = [await replica(), await replica()];
    const created = await one.request(
      {
        method: "tools/call",
        params: { name: "slow_compute", arguments: {}, task: { ttl: 60_000 } },
      },
      CreateTaskResultSchema,
    );
    const taskId = created.task.taskId;
    assert.equal(created.task.status, "working");
    const seen = await two.experimental.tasks.getTask(taskId);
    assert.equal(seen.taskId, taskId);
    let status = seen.status;
    for (let i = 0; i < 100 && status !== "completed"; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      status = (await two.experimental.tasks.getTask(taskId)).status;
    }
    assert.equal(status, "completed");
    const result = await two.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    assert.deepEqual(result.content, [{ type: "text", text: "42" }]);
    await one.close();
    await two.close();
  });

  it("maps each TaskStore call onto the log", async () => {
    const tasks = store();
    const made = await tasks.createTask({ ttl: 60_000, pollInterval: 100 });
    assert.deepEqual([made.status, made.ttl, made.pollInterval], ["working", 60_000, 100]);
    assert.equal(await tasks.getTask("A".repeat(22)), null);
    await tasks.updateTaskStatus(made.taskId, "input_required", "waiting");
    assert.equal((await tasks.getTask(made.taskId))?.status, "input_required");
    await tasks.updateTaskStatus(made.taskId, "working");
    const broken = { content: [{ type: "text", text: "it broke" }], isError: true };
    await tasks.storeTaskResult(made.taskId, "failed", broken);
    assert.equal((await tasks.getTask(made.taskId))?.status, "failed");
    assert.deepEqual(await tasks.getTaskResult(made.taskId), broken);

    const other = await tasks.createTask({});
    await tasks.updateTaskStatus(other.taskId, "cancelled");
    assert.equal((await tasks.getTask(other.taskId))?.status, "cancelled");
    assert.deepEqual(await tasks.listTasks(), { tasks: [] });
  });

  it("keeps a task's lease while it works, and lets it lapse once closed", async () => {
    const tasks = store(1);
    const made = await tasks.createTask({});
    await new Promise((resolve) => setTimeout(resolve, 3500));
    assert.equal((await tasks.getTask(made.taskId))?.status, "working");
    tasks.close();
    const client = new TaskClient({ baseUrl: service.url });
    let task = await client.get(made.taskId);
    for (let i = 0; i < 100 && task.status === "working"; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      task = await client.get(made.taskId);
    }
    assert.deepEqual([task.status, isWorkerLost(task)], ["failed", true]);
  });
});
