/**
 * Two 2026-07-28 MCP server processes (SDK 2.x, `createMcpHandler`) on one service, sharing
 * one `EventLogServerEventBus`: a client listening (`subscriptions/listen`) on replica B hears
 * `notifications/resources/updated` published by a tool on replica A — before the service
 * restarts, not what was published while it was down (fire-and-forget: dropped, counted),
 * and again after it is back.
 */

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

import type { BusStats } from "../src/index.js";
import { type Service, startService } from "./support/service.js";
import { waitFor } from "./support/wait.js";

/** One replica: `support/bus-server.js` in a process of its own. */
class Replica {
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
    readonly output: () => string,
  ) {}

  static async start(serviceUrl: string, busName: string): Promise<Replica> {
    const program = join(dirname(fileURLToPath(import.meta.url)), "support", "bus-server.js");
    const child = spawn(process.execPath, [program], {
      env: { ...process.env, EVENTLOG_URL: serviceUrl, BUS_NAME: busName },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stderr?.on(
      "data",
      (chunk: Buffer) => (output = (output + chunk.toString()).slice(-10_000)),
    );
    const lines = createInterface({ input: child.stdout! });
    const first = await new Promise<string>((resolve, reject) => {
      lines.once("line", resolve);
      child.once("exit", (code) => reject(new Error(`a replica exited (${code}):\n${output}`)));
    });
    lines.close();
    const { port } = JSON.parse(first) as { port: number };
    return new Replica(child, `http://127.0.0.1:${port}`, () => output);
  }

  async stats(): Promise<BusStats> {
    return (await (await fetch(`${this.url}/_stats`)).json()) as BusStats;
  }

  /** A 2026-07-28 client of this replica. */
  async client(): Promise<Client> {
    const client = new Client(
      { name: "bus-test", version: "1.0.0" },
      { versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    await client.connect(new StreamableHTTPClientTransport(new URL(`${this.url}/mcp`)));
    return client;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.child.kill("SIGTERM");
    await exited;
  }
}

describe("two 2026-07-28 MCP server processes on one service, one bus", () => {
  let service: Service;
  const replicas: Replica[] = [];
  const clients: Client[] = [];

  before(async () => {
    service = await startService("sqlite");
    for (let i = 0; i < 2; i += 1) replicas.push(await Replica.start(service.url, "e2e"));
  });

  after(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    for (const replica of replicas) await replica.stop();
    await service?.stop();
  });

  it("a listener on B hears a tool on A, before and after the service restarts", async () => {
    const [a, b] = replicas as [Replica, Replica];
    const listener = await b.client();
    const caller = await a.client();
    clients.push(listener, caller);
    const heard: string[] = [];
    listener.setNotificationHandler("notifications/resources/updated", (notification) => {
      heard.push(notification.params.uri);
    });
    const uris = ["file:///before.md", "file:///during.md", "file:///after.md"];
    const subscription = await listener.listen({ resourceSubscriptions: uris });
    assert.deepEqual(subscription.honoredFilter.resourceSubscriptions, uris);
    const touch = (uri: string) => caller.callTool({ name: "touch", arguments: { uri } });

    await touch("file:///before.md");
    await waitFor(() => heard.length === 1, "B's listener to hear A's tool");

    await service.restart(async () => {
      await touch("file:///during.md");
      assert.ok((await a.stats()).publishFailures >= 1, "the publish while down is counted");
    });
    await touch("file:///after.md");
    await waitFor(() => heard.length === 2, `B to hear A again:\n${b.output()}`);
    assert.deepEqual(heard, ["file:///before.md", "file:///after.md"]);
    // A's own follower hands the events to A's listeners (none here) the same way.
    const deadline = Date.now() + 30_000;
    while ((await a.stats()).delivered < 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const [statsA, statsB] = [await a.stats(), await b.stats()];
    assert.ok(statsA.reconnects >= 1 && statsB.reconnects >= 1, "both followers reconnected");
    assert.deepEqual([statsA.delivered, statsB.delivered], [2, 2], "each event once per replica");
    assert.match(a.output(), /publishing to mcp-bus\.e2e failed/);
  });
});
