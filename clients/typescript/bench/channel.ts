/**
 * `EventLogEventStore.storeEvent` per message over the append channel, or over REST.
 *
 * `node build/bench/channel.js --url <service> [--messages N] [--transport channel|rest]`
 * stores N progress notifications one at a time on one SDK stream (as the SDK's transport
 * does), after a warm-up, and prints one JSON line: the per-message latency (p50, p90, p99,
 * mean, in ms), the messages that went out unstored and the appends that fell back to REST.
 * With `--bare`, the bare `AppendChannel.append` (or `EventLogClient.append`) round trip is
 * measured as well. `bench/ts_channel.py` runs it against a service it started, in rounds
 * interleaved with the service's own REST append p50 (wrk), for `make bench`.
 */

import { parseArgs } from "node:util";

import { AppendChannel, EventLogClient, EventLogEventStore } from "../src/index.js";
import { perMessage, progress } from "./messages.js";

interface Figures {
  readonly p50_ms: number;
  readonly p90_ms: number;
  readonly p99_ms: number;
  readonly mean_ms: number;
  readonly count: number;
}

function figures(timings: number[]): Figures {
  const ordered = [...timings].sort((a, b) => a - b);
  const at = (q: number): number =>
    ordered[Math.min(ordered.length - 1, Math.floor(ordered.length * q))] ?? 0;
  const mean = ordered.reduce((a, b) => a + b, 0) / Math.max(1, ordered.length);
  return {
    p50_ms: at(0.5),
    p90_ms: at(0.9),
    p99_ms: at(0.99),
    mean_ms: mean,
    count: ordered.length,
  };
}

async function perAppend(
  log: EventLogClient,
  channel: AppendChannel | undefined,
  messages: number,
): Promise<number[]> {
  const generation = await log.openGeneration(`bench.bare.${Date.now()}`);
  const timings: number[] = [];
  for (let step = 1; step <= messages; step += 1) {
    const events = [{ data: JSON.stringify(progress(step)), event: "message" }];
    const started = performance.now();
    if (channel === undefined) await log.append(generation.token, events, { firstSeq: step });
    else await channel.append({ generation: generation.token, events, firstSeq: step });
    timings.push(performance.now() - started);
  }
  return timings;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      url: { type: "string" },
      messages: { type: "string", default: "1000" },
      warmup: { type: "string", default: "200" },
      transport: { type: "string", default: "channel" },
      bare: { type: "boolean", default: false },
    },
  });
  const transport = values.transport === "rest" ? "rest" : "channel";
  const baseUrl = values.url;
  if (baseUrl === undefined) throw new Error("--url is required");
  const messages = Number(values.messages);
  const store = new EventLogEventStore({ baseUrl, appendTransport: transport });
  const cpu = process.cpuUsage();
  await perMessage(store, "warm-up", Number(values.warmup));
  const store_ = figures(await perMessage(store, "measured", messages));
  const used = process.cpuUsage(cpu);
  const bare = values.bare
    ? figures(await perAppend(store.client, store.channel, messages))
    : undefined;
  const out = {
    transport,
    node: process.version,
    messages,
    store: store_,
    bare,
    client_cpu_ms_per_message:
      (used.user + used.system) / 1000 / (messages + Number(values.warmup)),
    unstored: store.stats.storeFailures,
    channel_fallbacks: store.stats.channelFallbacks,
    channels_opened: store.channel?.counts.opened ?? 0,
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
  AppendChannel.closeShared();
}

await main();
