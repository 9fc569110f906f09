/**
 * Publish → listener latency of `EventLogServerEventBus` across two replicas, against the
 * SDK's in-process `InMemoryServerEventBus` in the same run.
 *
 * `npm run bench:bus [-- --rate 200] [-- --seconds 10] [-- --backend postgresql] [-- --json]`
 * (`--json`: one JSON line of the figures last, which `bench/bus.py` reads) starts the
 * service as a process (a fresh SQLite file, or a fresh PostgreSQL database — and on
 * PostgreSQL a second service process on the same database, as the service's other
 * replica), then publishes `notifications/resources/updated` at a steady rate on one bus and
 * measures, on a second bus of the same name (its own client, connections and live follower,
 * as another MCP server replica's; on PostgreSQL talking to the other service), the time
 * from `publish` to its listener. The bus promises p99 ≤ 50 ms at 200 events/s.
 */

import { loadavg } from "node:os";
import { parseArgs } from "node:util";

import { InMemoryServerEventBus } from "@modelcontextprotocol/server";

import { EventLogServerEventBus, type McpServerEventBus, type ServerEvent } from "../src/index.js";
import { type Backend, startService } from "../test/support/service.js";

/** Milliseconds from each publish on `publisher` to the listener of `listener`. */
async function latencies(
  publisher: McpServerEventBus,
  listener: McpServerEventBus,
  rate: number,
  count: number,
): Promise<number[]> {
  const sentAt = new Map<string, number>();
  const timings: number[] = [];
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  const unsubscribe = listener.subscribe((event: ServerEvent) => {
    if (event.kind !== "resource_updated") return;
    const sent = sentAt.get(event.uri);
    if (sent === undefined) return;
    timings.push(performance.now() - sent);
    if (timings.length === count) done();
  });
  const start = performance.now();
  for (let i = 0; i < count; i += 1) {
    // A steady rate: each publish at its own instant, whatever the previous one took.
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const uri = `file:///bench/${i}`;
    sentAt.set(uri, performance.now());
    publisher.publish({ kind: "resource_updated", uri });
  }
  await Promise.race([all, new Promise((resolve) => setTimeout(resolve, 30_000))]);
  unsubscribe();
  return timings;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
}

function ms(value: number): string {
  return `${value.toFixed(2).padStart(8)}ms`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rate: { type: "string", default: "200" },
      seconds: { type: "string", default: "10" },
      backend: { type: "string", default: "sqlite" },
      json: { type: "boolean", default: false },
    },
  });
  const rate = Number(values.rate);
  const count = Math.round(rate * Number(values.seconds));
  const backend = values.backend as Backend;
  const before = loadavg();
  const service = await startService(backend);
  // SQLite: one service (its other processes would hear the file's changes only at their
  // poll interval); PostgreSQL: two, so the event crosses the service's replicas too.
  const other =
    backend === "postgresql"
      ? await startService(backend, { replicaOf: service }).catch(async (error: unknown) => {
          await service.stop();
          throw error;
        })
      : service;
  const quiet = { info: () => undefined, warn: console.warn, error: console.error };
  const replicas = [service, other].map(
    (s) => new EventLogServerEventBus({ baseUrl: s.url, name: "bench", logger: quiet }),
  );
  try {
    await Promise.all(replicas.map((bus) => bus.start()));
    const [a, b] = replicas as [EventLogServerEventBus, EventLogServerEventBus];
    await latencies(a, b, rate, Math.min(200, count)); // warm-up: connections, page cache
    const memory = new InMemoryServerEventBus();
    const rows: [string, number[]][] = [
      ["InMemoryServerEventBus", await latencies(memory, memory, rate, count)],
      ["EventLogServerEventBus", await latencies(a, b, rate, count)],
    ];
    const after = loadavg();
    console.log(
      `bus publish -> listener on another replica, ${count} events at ${rate}/s (${backend}, ${other === service ? "1 service" : "2 services"}):`,
    );
    console.log(
      `  ${"".padEnd(24)} ${"p50".padStart(10)} ${"p99".padStart(10)} ${"max".padStart(10)}  delivered`,
    );
    const figures: Record<string, { p50: number; p99: number; max: number; arrived: number }> = {};
    for (const [name, timings] of rows) {
      const sorted = [...timings].sort((x, y) => x - y);
      const [p50, p99, max] = [
        percentile(sorted, 0.5),
        percentile(sorted, 0.99),
        sorted.at(-1) ?? NaN,
      ];
      figures[name] = { p50, p99, max, arrived: timings.length };
      console.log(
        `  ${name.padEnd(24)} ${ms(p50)} ${ms(p99)} ${ms(max)}  ${timings.length}/${count}`,
      );
    }
    console.log(`  goal: p99 <= 50 ms at 200 events/s; dropped ${a.stats.publishFailures}`);
    console.log(
      `  node ${process.version}, ${new Date().toISOString()}, load average ${before.map((l) => l.toFixed(2)).join(" ")} before, ${after.map((l) => l.toFixed(2)).join(" ")} after`,
    );
    if (values.json) {
      console.log(JSON.stringify({ backend, rate, events: count, figures }));
    }
  } finally {
    for (const bus of replicas) await bus.close();
    if (other !== service) await other.stop();
    await service.stop();
  }
}

await main();
