/**
 * The SDK client's side of `bench/ts_sdk_server.py`: calls `progress(n)` on an SDK server.
 *
 * `node build/bench/sdk-calls.js --url <mcp endpoint> [--notifications 200] [--concurrent 16]
 * [--single 5]` opens `concurrent` sessions with `@modelcontextprotocol/sdk` 1.x's client
 * (protocol 2025-11-25), warms one up with a call, then times `single` calls one after another
 * in that session (their median is the one-call figure), then `concurrent` calls at once, one
 * per session (notifications/s over the wall time), and prints one JSON line. Every progress
 * notification is counted; a missing one fails the run.
 */

import { parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    notifications: { type: "string", default: "200" },
    concurrent: { type: "string", default: "16" },
    single: { type: "string", default: "5" },
  },
});
const url = new URL(values.url ?? "");
const n = Number(values.notifications);
const concurrent = Number(values.concurrent);
const single = Number(values.single);

let counted = 0;

async function connect(): Promise<Client> {
  const client = new Client({ name: "bench", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url));
  return client;
}

async function call(client: Client): Promise<void> {
  const result = await client.request(
    { method: "tools/call", params: { name: "progress", arguments: { n } } },
    CallToolResultSchema,
    { onprogress: () => void (counted += 1), timeout: 120_000 },
  );
  if (result.isError) throw new Error(JSON.stringify(result));
}

const clients = await Promise.all(Array.from({ length: Math.max(1, concurrent) }, connect));
const first = clients[0] as Client;
await call(first); // warm-up: connections, the store's channel, the JIT
const times: number[] = [];
for (let i = 0; i < single; i += 1) {
  const began = performance.now();
  await call(first);
  times.push(performance.now() - began);
}
counted = 0;
const began = performance.now();
await Promise.all(clients.map(call));
const elapsed = (performance.now() - began) / 1000;
if (counted !== n * clients.length) {
  throw new Error(`counted ${counted} progress notifications, not ${n * clients.length}`);
}
times.sort((a, b) => a - b);
const median = times[Math.floor(times.length / 2)] ?? 0;
console.log(
  JSON.stringify({
    single_ms: median,
    single_all_ms: times,
    notifications_per_s: counted / elapsed,
    concurrent: clients.length,
    notifications: n,
  }),
);
await Promise.all(clients.map((c) => c.close()));
process.exit(0);
