/**
 * The latency `EventLogEventStore.storeEvent` adds to every MCP message.
 *
 * `npm run bench [-- --messages N] [-- --backend postgresql]` starts the service as a
 * process (a fresh SQLite file with the default settings, or a fresh PostgreSQL database),
 * then stores the same progress notifications, one at a time on one stream as the SDK's
 * transport does, through the SDK's in-memory example store (`InMemoryEventStore` from
 * `examples/shared`) and through `EventLogEventStore`, in one run, and prints the per-message
 * latency of each, the bare `client.append` round trip, and the difference. The method is
 * the Python store's `bench/mcp_overhead.py`, so the figures compare.
 */

import { loadavg } from "node:os";
import { parseArgs } from "node:util";

import { InMemoryEventStore } from "@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js";

import { EventLogClient, EventLogEventStore } from "../src/index.js";
import { type Backend, startService } from "../test/support/service.js";
import { perMessage, progress } from "./messages.js";

/** Milliseconds each bare `append` took: the service's own share of `storeEvent`. */
async function perAppend(log: EventLogClient, messages: number): Promise<number[]> {
  const generation = await log.openGeneration(`bench.bare.${Date.now()}`);
  const timings: number[] = [];
  for (let step = 1; step <= messages; step += 1) {
    const event = { data: JSON.stringify(progress(step)), event: "message" };
    const started = performance.now();
    await log.append(generation.token, [event], { firstSeq: step });
    timings.push(performance.now() - started);
  }
  return timings;
}

/** Median, mean and p99 in milliseconds. */
function summary(timings: number[]): [number, number, number] {
  const ordered = [...timings].sort((a, b) => a - b);
  const middle = ordered.length / 2;
  const median =
    ordered.length % 2
      ? (ordered[Math.floor(middle)] ?? 0)
      : ((ordered[middle - 1] ?? 0) + (ordered[middle] ?? 0)) / 2;
  const mean = ordered.reduce((a, b) => a + b, 0) / ordered.length;
  const p99 = ordered[Math.min(ordered.length - 1, Math.floor(ordered.length * 0.99))] ?? 0;
  return [median, mean, p99];
}

function ms(value: number): string {
  return `${value.toFixed(3).padStart(7)}ms`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      messages: { type: "string", default: "2000" },
      backend: { type: "string", default: "sqlite" },
    },
  });
  const messages = Number(values.messages);
  const backend = values.backend as Backend;
  const before = loadavg();
  const service = await startService(backend);
  try {
    const eventlog = new EventLogEventStore({ baseUrl: service.url });
    await perMessage(eventlog, "warm-up", 100); // connections, the database's page cache
    const rows: [string, [number, number, number]][] = [
      [
        "in-memory example store",
        summary(await perMessage(new InMemoryEventStore(), "1", messages)),
      ],
      ["EventLogEventStore", summary(await perMessage(eventlog, "1", messages))],
      ["(bare client.append)", summary(await perAppend(eventlog.client, messages))],
    ];
    const after = loadavg();
    console.log(
      `storeEvent, ${messages} progress notifications on one stream, one at a time (${backend}):`,
    );
    console.log(
      `  ${"".padEnd(26)} ${"median".padStart(9)} ${"mean".padStart(9)} ${"p99".padStart(9)}`,
    );
    for (const [name, [median, mean, p99]] of rows) {
      console.log(`  ${name.padEnd(26)} ${ms(median)} ${ms(mean)} ${ms(p99)}`);
    }
    const base = rows[0]?.[1] ?? [0, 0, 0];
    const ours = rows[1]?.[1] ?? [0, 0, 0];
    const added = ours.map((value, i) => value - (base[i] ?? 0));
    console.log(
      `  ${"added per message".padEnd(26)} ${added.map((v) => `+${ms(v).trim()}`.padStart(9)).join(" ")}`,
    );
    console.log(
      `  node ${process.version}, ${new Date().toISOString()}, load average ${before.map((l) => l.toFixed(2)).join(" ")} before, ${after.map((l) => l.toFixed(2)).join(" ")} after`,
    );
    if (eventlog.stats.storeFailures > 0)
      console.log(`  (${eventlog.stats.storeFailures} messages went out unstored)`);
  } finally {
    await service.stop();
  }
}

await main();
