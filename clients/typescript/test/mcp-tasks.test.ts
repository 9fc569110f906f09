/**
 * MCP's tasks extension on servers built with the official TypeScript SDK 2.x
 * (`@modelcontextprotocol/server` 2.4.0, `createMcpHandler`, 2026-07-28), the task record in a
 * real service process: a tool call made on one server is a task that another server (a
 * replica sharing only the log) answers `tasks/get`, `tasks/update` and `tasks/cancel` for.
 * `tools/call` is sent as plain JSON-RPC (the SDK's own `Client` refuses a `resultType:
 * "task"` answer); the `tasks/*` requests go through the SDK's `Client.request`.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { serve } from "@hono/node-server";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import * as z from "zod";

import {
  EventLogTasks,
  TaskClient,
  TaskFailed,
  TaskRunner,
  TASKS_EXTENSION,
} from "../src/index.js";
import { rawMcpPost } from "./support/raw-mcp.js";
import { freePort, type Service, startService } from "./support/service.js";

const ASKS = { ok: { method: "elicitation/create", params: { message: "go on?" } } };
const VERSION = "2026-07-28";

let service: Service;
const closers: (() => Promise<void>)[] = [];

/** One MCP server (what one replica runs): its own runner, the shared log; its URL. */
async function replica(): Promise<string> {
  const runner = new TaskRunner(new TaskClient({ baseUrl: service.url }), {
    leaseSeconds: 5,
    pollMs: 50,
  });
  const tasks = new EventLogTasks(runner, { pollIntervalMs: 50 });
  const make = () => {
    const server = new McpServer(
      { name: "replica", version: "1.0.0" },
      { capabilities: { extensions: tasks.capability } },
    );
    tasks.attach(server.server);
    server.registerTool(
      "slow_compute",
      { inputSchema: z.object({ n: z.number() }) },
      tasks.tool<{ n: number }>(async ({ n }, _ctx, run) => {
        await run?.progress({ progress: 1, total: 1 });
        await new Promise((resolve) => setTimeout(resolve, 200));
        return { content: [{ type: "text", text: String(n * 2) }] };
      }),
    );
    server.registerTool(
      "must_be_task",
      {},
      tasks.tool(async () => ({ content: [{ type: "text", text: "ran" }] }), { required: true }),
    );
    server.registerTool(
      "failing_job",
      {},
      tasks.tool(async () => {
        throw new TaskFailed(-32001, "the job cannot run");
      }),
    );
    server.registerTool(
      "confirm",
      {},
      tasks.tool(async (_args, _ctx, run) => {
        assert.ok(run !== undefined);
        const answers = await run.ask(ASKS);
        const action = (answers["ok"] as { action: string }).action;
        return { content: [{ type: "text", text: action === "accept" ? "confirmed" : "no" }] };
      }),
    );
    server.registerTool(
      "wait_forever",
      {},
      tasks.tool(
        (_args, _ctx, run) =>
          new Promise((resolve) => {
            const timer = setTimeout(() => resolve({ content: [] }), 60_000);
            run?.signal.addEventListener("abort", () => clearTimeout(timer));
          }),
      ),
    );
    return server;
  };
  const handler = createMcpHandler(make, { legacy: "reject" });
  const port = await freePort();
  const http = serve({ fetch: (r) => handler.fetch(r), hostname: "127.0.0.1", port });
  closers.push(async () => {
    await runner.close();
    await new Promise((resolve) => http.close(resolve));
  });
  return `http://127.0.0.1:${port}/mcp`;
}

let id = 0;

/** A 2026-07-28 `tools/call` as plain JSON-RPC; its result (or error). */
async function callTool(
  url: string,
  name: string,
  args: Record<string, unknown>,
  declares = true,
): Promise<Record<string, unknown>> {
  id += 1;
  const capabilities = declares ? { extensions: { [TASKS_EXTENSION]: {} } } : {};
  const response = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": VERSION,
      "mcp-method": "tools/call",
      "mcp-name": name,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: {
        name,
        arguments: args,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": VERSION,
          "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
          "io.modelcontextprotocol/clientCapabilities": capabilities,
        },
      },
    }),
  });
  const text = await response.text();
  const json = text.startsWith("{")
    ? text
    : (text
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trim())
        .find((data) => data.includes(`"id":${id}`)) ?? text);
  return JSON.parse(json) as Record<string, unknown>;
}

async function requester(url: string): Promise<Client> {
  const client = new Client(
    { name: "requester", version: "1.0.0" },
    {
      capabilities: { extensions: { [TASKS_EXTENSION]: {} } },
      versionNegotiation: { mode: { pin: VERSION } },
    },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  closers.push(() => client.close());
  return client;
}

const ANY = z.object({}).passthrough();

async function getTask(client: Client, taskId: string): Promise<Record<string, unknown>> {
  return client.request({ method: "tasks/get", params: { taskId } }, ANY);
}

async function until(
  client: Client,
  taskId: string,
  statuses: string[],
): Promise<Record<string, unknown>> {
  for (let i = 0; i < 200; i += 1) {
    const task = await getTask(client, taskId);
    if (statuses.includes(task["status"] as string)) return task;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail(`task ${taskId} never reached ${statuses.join("|")}`);
}

before(async () => {
  service = await startService("sqlite");
});

after(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined);
  await service?.stop();
});

describe("the tasks extension on SDK 2.x servers", () => {
  it("a task made on one replica is read on the other", async () => {
    const [one, two] = [await replica(), await replica()];
    const created = await callTool(one, "slow_compute", { n: 21 });
    const result = created["result"] as Record<string, unknown>;
    assert.deepEqual(
      [result["resultType"], result["status"], result["pollIntervalMs"]],
      ["task", "working", 50],
    );
    const taskId = result["taskId"] as string;
    const other = await requester(two);
    const seen = await getTask(other, taskId);
    assert.equal(seen["taskId"], taskId);
    const done = await until(other, taskId, ["completed", "failed"]);
    assert.equal(done["status"], "completed");
    assert.deepEqual(done["result"], { content: [{ type: "text", text: "42" }] });

    await assert.rejects(getTask(other, "A".repeat(22)), (error: { code?: number }) => {
      assert.equal(error.code, -32602);
      return true;
    });

    // An Mcp-Name header naming another task than params.taskId: -32020 (SDK 2.4.0 checks it
    // before the handler; the handler's own check is for transports that do not).
    const body = await rawMcpPost(two, {
      id: 99,
      method: "tasks/get",
      mcpName: "B".repeat(22),
      params: { taskId },
    });
    assert.equal((JSON.parse(body) as { error?: { code: number } }).error?.code, -32020, body);
  });

  it("settles a thrown JSON-RPC error as failed", async () => {
    const url = await replica();
    const created = await callTool(url, "failing_job", {});
    const taskId = (created["result"] as { taskId: string }).taskId;
    const failed = await until(await requester(url), taskId, ["failed", "completed"]);
    assert.deepEqual(failed["error"], { code: -32001, message: "the job cannot run" });
  });

  it("runs the call for a requester without the extension, or refuses it -32021", async () => {
    const url = await replica();
    const plain = await callTool(url, "slow_compute", { n: 1 }, false);
    assert.deepEqual((plain["result"] as { content: unknown }).content, [
      { type: "text", text: "2" },
    ]);
    // SDK 2.4.0 answers an error a registered tool throws as a tool error.
    const refused = (await callTool(url, "must_be_task", {}, false))["result"] as {
      isError: boolean;
      content: { text: string }[];
    };
    assert.equal(refused.isError, true);
    assert.match(refused.content[0]?.text ?? "", /Missing required client capability/);
    // tasks/get from a requester that did not declare the extension: -32021.
    const undeclared = new Client(
      { name: "plain", version: "1.0.0" },
      { versionNegotiation: { mode: { pin: VERSION } } },
    );
    await undeclared.connect(new StreamableHTTPClientTransport(new URL(url)));
    closers.push(() => undeclared.close());
    await assert.rejects(getTask(undeclared, "A".repeat(22)), (error: { code?: number }) => {
      assert.equal(error.code, -32021);
      return true;
    });
  });

  it("answers input through tasks/update and cancels through the other replica", async () => {
    const [one, two] = [await replica(), await replica()];
    const other = await requester(two);
    const created = await callTool(one, "confirm", {});
    const taskId = (created["result"] as { taskId: string }).taskId;
    const waiting = await until(other, taskId, ["input_required"]);
    assert.deepEqual(waiting["inputRequests"], ASKS);
    await other.request(
      {
        method: "tasks/update",
        params: { taskId, inputResponses: { ok: { action: "accept" } } },
      },
      ANY,
    );
    const done = await until(other, taskId, ["completed", "failed"]);
    assert.deepEqual(done["result"], { content: [{ type: "text", text: "confirmed" }] });

    const forever = await callTool(one, "wait_forever", {});
    const foreverId = (forever["result"] as { taskId: string }).taskId;
    await other.request({ method: "tasks/cancel", params: { taskId: foreverId } }, ANY);
    const cancelled = await until(await requester(one), foreverId, ["cancelled"]);
    assert.equal(cancelled["result"], undefined);
  });
});
