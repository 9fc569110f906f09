/**
 * A 2026-07-28 MCP server replica on SDK 2.x (`createMcpHandler`, strict modern) whose change
 * events travel through an `EventLogServerEventBus`, as a program of its own
 * (`node bus-server.js`; the service is `EVENTLOG_URL`, the bus `BUS_NAME`).
 *
 * Tool `touch` publishes `notifications/resources/updated` for its `uri`. It prints one JSON
 * line when listening, `{"port"}`, and answers `GET /_stats` with the bus's counts.
 */

import { createServer } from "node:http";

import { getRequestListener } from "@hono/node-server";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";

import { EventLogServerEventBus, type StoreLogger } from "../../src/index.js";

const logger: StoreLogger = {
  info: (message) => process.stderr.write(`info ${message}\n`),
  warn: (message) => process.stderr.write(`warn ${message}\n`),
  error: (message) => process.stderr.write(`error ${message}\n`),
};
const bus = new EventLogServerEventBus({
  name: process.env["BUS_NAME"] ?? "default",
  logger,
  retry: { attempts: 1, baseDelayMs: 1, maxDelayMs: 1 },
  timeoutMs: 2_000,
});
await bus.start();

function replica(): McpServer {
  const server = new McpServer(
    { name: "bus-replica", version: "1.0.0" },
    { capabilities: { resources: { subscribe: true, listChanged: true } } },
  );
  server.registerResource("report", "file:///report.md", {}, async () => ({
    contents: [{ uri: "file:///report.md", text: "the report" }],
  }));
  server.registerTool("touch", { inputSchema: z.object({ uri: z.string() }) }, async ({ uri }) => {
    handler.notify.resourceUpdated(uri);
    await bus.flush();
    return { content: [{ type: "text", text: `touched ${uri}` }] };
  });
  return server;
}

const handler = createMcpHandler(replica, { bus, legacy: "reject" });
const mcp = getRequestListener((request: Request) => handler.fetch(request));
const server = createServer((req, res) => {
  if (req.url === "/_stats") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(bus.stats));
    return;
  }
  void mcp(req, res);
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});
