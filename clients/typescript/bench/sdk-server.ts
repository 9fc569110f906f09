/**
 * The TypeScript SDK's server, as a process, for `bench/ts_sdk_server.py`.
 *
 * `node build/bench/sdk-server.js --port P --sdk v1|v2 --store none|pipelined|per_event
 * [--eventlog URL] [--pipeline N]` serves one tool, `progress(n)`, which reports progress 1..n on its
 * request's stream and returns: the harness of the Python SDK figures, for the TypeScript
 * SDK of either line — `v1`: `@modelcontextprotocol/sdk` 1.x, `McpServer` +
 * `StreamableHTTPServerTransport`; `v2`: `@modelcontextprotocol/server` 2.x, a sessionful
 * `WebStandardStreamableHTTPServerTransport` served through `@hono/node-server` (as
 * docs/clients-typescript.md wires it for the 2025 revisions). One session, one transport,
 * one `EventLogEventStore` (with `--store pipelined` or `per_event`), or none.
 */

import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";

import { getRequestListener } from "@hono/node-server";
import { McpServer as McpServerV1 } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  McpServer as McpServerV2,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import { z } from "zod";

import { EventLogEventStore } from "../src/index.js";

const { values } = parseArgs({
  options: {
    port: { type: "string" },
    sdk: { type: "string", default: "v1" },
    store: { type: "string", default: "none" },
    eventlog: { type: "string" },
    pipeline: { type: "string" },
  },
});
const port = Number(values.port);
const sdk = values.sdk;
const storeKind = values.store;
if (!["none", "pipelined", "per_event"].includes(storeKind ?? "")) {
  throw new Error(`--store ${storeKind}: none, pipelined or per_event`);
}
const quiet = { info: () => undefined, warn: console.warn, error: console.error };
const stores: EventLogEventStore[] = [];

function newStore(): EventLogEventStore | undefined {
  if (storeKind === "none") return undefined;
  const store = new EventLogEventStore({
    ...(values.eventlog === undefined ? {} : { baseUrl: values.eventlog }),
    durability: storeKind === "per_event" ? "per_event" : "pipelined",
    ...(values.pipeline === undefined ? {} : { pipeline: Number(values.pipeline) }),
    logger: quiet,
  });
  stores.push(store);
  return store;
}

type Notify = (step: number, total: number) => Promise<void>;

async function count(
  n: number,
  notify: Notify,
): Promise<{ content: { type: "text"; text: string }[] }> {
  for (let step = 1; step <= n; step += 1) await notify(step, n);
  return { content: [{ type: "text", text: `counted to ${n}` }] };
}

const shape = { n: z.number().int() };

function serverV1(): McpServerV1 {
  const server = new McpServerV1({ name: "eventlog-bench", version: "1.0.0" });
  server.registerTool("progress", { inputSchema: shape }, ({ n }, extra) => {
    const token = extra._meta?.progressToken ?? 0;
    return count(n, (progress, total) =>
      extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress, total, message: `step ${progress}` },
      }),
    );
  });
  return server;
}

function serverV2(): McpServerV2 {
  const server = new McpServerV2({ name: "eventlog-bench", version: "2.0.0" });
  server.registerTool("progress", { inputSchema: z.object(shape) }, ({ n }, ctx) => {
    const token = ctx.mcpReq._meta?.progressToken ?? 0;
    return count(n, (progress, total) =>
      ctx.mcpReq.notify({
        method: "notifications/progress",
        params: { progressToken: token, progress, total, message: `step ${progress}` },
      }),
    );
  });
  return server;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

function handlerV1(): Handler {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  return async (req, res) => {
    const sessionId = req.headers["mcp-session-id"];
    let transport = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
    if (transport === undefined && sessionId !== undefined) {
      res.writeHead(404).end();
      return;
    }
    if (transport === undefined) {
      const store = newStore();
      const created: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        ...(store === undefined ? {} : { eventStore: store }),
        onsessioninitialized: (id) => void transports.set(id, created),
      });
      store?.attach(created);
      await serverV1().connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res);
  };
}

function handlerV2(): Handler {
  const transports = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const handle = async (request: Request): Promise<Response> => {
    const sessionId = request.headers.get("mcp-session-id");
    let transport = sessionId === null ? undefined : transports.get(sessionId);
    if (transport === undefined && sessionId !== null) return new Response(null, { status: 404 });
    if (transport === undefined) {
      const store = newStore();
      const created: WebStandardStreamableHTTPServerTransport =
        new WebStandardStreamableHTTPServerTransport({
          sessionIdGenerator: randomUUID,
          ...(store === undefined ? {} : { eventStore: store }),
          onsessioninitialized: (id) => void transports.set(id, created),
        });
      store?.attach(created);
      await serverV2().connect(created);
      transport = created;
    }
    return transport.handleRequest(request);
  };
  const listener = getRequestListener(handle);
  return async (req, res) => listener(req, res);
}

const handler = sdk === "v2" ? handlerV2() : handlerV1();
const server = createServer((req, res) => {
  handler(req, res).catch((error: unknown) => {
    console.error(error);
    if (!res.headersSent) res.writeHead(500).end();
  });
});
server.listen(port, "127.0.0.1", () => console.log(JSON.stringify({ listening: port })));

/** On SIGTERM: the store counts, on stderr, for the harness's log. */
process.on("SIGTERM", () => {
  const totals = { stored: 0, storeFailures: 0, lost: 0, channelFallbacks: 0 };
  for (const store of stores) {
    totals.stored += store.stats.stored;
    totals.storeFailures += store.stats.storeFailures;
    totals.lost += store.stats.lost;
    totals.channelFallbacks += store.stats.channelFallbacks;
  }
  console.error(JSON.stringify({ store: storeKind, sdk, ...totals }));
  process.exit(0);
});
