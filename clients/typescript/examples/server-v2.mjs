// An MCP server on SDK 2.x (@modelcontextprotocol/server) for every revision: 2026-07-28
// requests go to the strict modern handler (no sessions, no Last-Event-ID), the 2025-03-26 …
// 2025-11-25 ones (isLegacyRequest) to a sessionful transport with an EventLogEventStore of
// its own per session. The service is EVENTLOG_URL (default http://127.0.0.1:8080).
import { serve } from "@hono/node-server";
import {
  createMcpHandler,
  isLegacyRequest,
  McpServer,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import { EventLogEventStore } from "mcp-eventlog";

function reports() {
  const server = new McpServer(
    { name: "reports", version: "1.0.0" },
    { capabilities: { logging: {} } },
  );
  server.registerTool("report", {}, async (ctx) => {
    for (const page of [1, 2, 3]) await ctx.mcpReq.log("info", `page ${page}`);
    return { content: [{ type: "text", text: "3 pages" }] };
  });
  return server;
}

const modern = createMcpHandler(reports, { legacy: "reject" });
const sessions = new Map(); // mcp-session-id -> the session's transport

async function legacy(request) {
  const id = request.headers.get("mcp-session-id");
  let transport = sessions.get(id);
  if (id !== null && transport === undefined) return new Response(null, { status: 404 });
  if (transport === undefined) {
    const store = new EventLogEventStore(); // one per session
    transport = store.attach(
      new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        eventStore: store,
        retryInterval: 1000,
        onsessioninitialized: (sessionId) => sessions.set(sessionId, transport),
        onsessionclosed: (sessionId) => sessions.delete(sessionId),
      }),
    );
    await reports().connect(transport);
  }
  return transport.handleRequest(request);
}

serve({
  fetch: async (request) =>
    (await isLegacyRequest(request)) ? legacy(request) : modern.fetch(request),
  hostname: "127.0.0.1",
  port: Number(process.env.PORT ?? 8000),
});
