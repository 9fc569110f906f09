// An MCP server on SDK 2.x (@modelcontextprotocol/server, 2026-07-28) whose slow_compute
// calls are durable tasks in the event log: any replica answers tasks/get|update|cancel for
// them. The service is EVENTLOG_URL (default http://127.0.0.1:8080).
import { serve } from "@hono/node-server";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { EventLogTasks, TaskClient, TaskRunner } from "mcp-eventlog";
import * as z from "zod";

const tasks = new EventLogTasks(new TaskRunner(new TaskClient(), { leaseSeconds: 30 }));

function compute() {
  const server = new McpServer(
    { name: "compute", version: "1.0.0" },
    { capabilities: { extensions: tasks.capability } },
  );
  tasks.attach(server.server); // tasks/get, tasks/update, tasks/cancel from the log
  server.registerTool(
    "slow_compute",
    { inputSchema: z.object({ n: z.number() }) },
    tasks.tool(async ({ n }, _ctx, run) => {
      for (const step of [1, 2, 3]) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        await run?.progress({ progress: step, total: 3 }); // run: undefined when synchronous
      }
      return { content: [{ type: "text", text: String(n * 2) }] };
    }),
  );
  return server;
}

const handler = createMcpHandler(compute, { legacy: "reject" });
serve({ fetch: handler.fetch, hostname: "127.0.0.1", port: Number(process.env.PORT ?? 8000) });
