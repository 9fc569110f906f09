/**
 * The documented SDK 2.x tasks example (`examples/tasks-server-v2.mjs`, shown whole in
 * docs/tasks.md) run as written: two processes of it on one service; a `tools/call` to one
 * is a task the other answers `tasks/get` for (through the SDK's `Client`).
 */

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import * as z from "zod";

import { TASKS_EXTENSION } from "../src/index.js";
import { rawMcpPost } from "./support/raw-mcp.js";
import { freePort, packageRoot, REPO, type Service, startService } from "./support/service.js";

const FILE = join(packageRoot(), "examples", "tasks-server-v2.mjs");
const VERSION = "2026-07-28";

let service: Service;
const processes: ChildProcess[] = [];

before(async () => {
  service = await startService("sqlite");
});

after(async () => {
  for (const child of processes) child.kill();
  await service?.stop();
});

async function start(): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, [FILE], {
    cwd: packageRoot(),
    env: { ...process.env, PORT: String(port), EVENTLOG_URL: service.url },
    stdio: "ignore",
  });
  processes.push(child);
  const url = `http://127.0.0.1:${port}/mcp`;
  for (let i = 0; i < 300; i += 1) {
    try {
      await fetch(url, { method: "GET" });
      return url;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  assert.fail(`the example did not start on ${url}`);
}

describe("the documented tasks example (SDK 2.x)", () => {
  it("is shown whole in docs/tasks.md", () => {
    const doc = readFileSync(join(REPO, "docs", "tasks.md"), "utf8");
    const section = doc.split("### A server on the TypeScript SDK 2.x", 2)[1] ?? "";
    const block = /```js\n([\s\S]*?)```/.exec(section)?.[1];
    assert.equal(block, readFileSync(FILE, "utf8"));
  });

  it("serves a task made by one process from another", async () => {
    const [one, two] = [await start(), await start()];
    const body = await rawMcpPost(one, {
      id: 1,
      method: "tools/call",
      mcpName: "slow_compute",
      params: { name: "slow_compute", arguments: { n: 21 } },
    });
    const created = (JSON.parse(body) as { result: { resultType: string; taskId: string } }).result;
    assert.equal(created.resultType, "task");

    const client = new Client(
      { name: "requester", version: "1.0.0" },
      {
        capabilities: { extensions: { [TASKS_EXTENSION]: {} } },
        versionNegotiation: { mode: { pin: VERSION } },
      },
    );
    await client.connect(new StreamableHTTPClientTransport(new URL(two)));
    let task: Record<string, unknown> = {};
    for (let i = 0; i < 100; i += 1) {
      task = await client.request(
        { method: "tasks/get", params: { taskId: created.taskId } },
        z.object({}).passthrough(),
      );
      if (task["status"] !== "working") break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await client.close();
    assert.equal(task["status"], "completed");
    assert.deepEqual(task["result"], { content: [{ type: "text", text: "42" }] });
  });
});
