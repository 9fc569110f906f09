/**
 * What an `EventLogEventStore` is built with: its options, the durability modes and the append
 * transports, with their defaults.
 */

import type { AppendChannel } from "./channel.js";
import type { EventLogClient } from "./client.js";
import type { ConnectionOptions } from "./connection.js";
import type { StoreLogger, StoreStats } from "./reporting.js";

/** What `storeEvent` waits for before it hands the SDK the message's id:
 *  - `pipelined`: the message is handed, in order, to the generation's writer (the service
 *    acknowledges behind it, within the generation's declared `pipeline` window);
 *  - `per_event`: the service committed the message (one round trip and one durable commit
 *    per message, on the SDK's path to the client). */
export type Durability = "pipelined" | "per_event";

/** Events a stream may run ahead of the service's acknowledgements, by default. */
export const DEFAULT_PIPELINE = 128;

/** How a store's appends travel: the append channel (falling back to REST where it cannot
 *  pass), or REST only. */
export type AppendTransport = "channel" | "rest";

/** The transport a store uses when its options do not say: `EVENTLOG_APPEND_TRANSPORT`
 *  (`channel` or `rest`), else `channel`. */
export function defaultAppendTransport(): AppendTransport {
  const value = (
    globalThis as { process?: { env?: Record<string, string | undefined> } }
  ).process?.env?.["EVENTLOG_APPEND_TRANSPORT"]
    ?.trim()
    .toLowerCase();
  if (value === undefined || value === "" || value === "channel") return "channel";
  if (value === "rest") return "rest";
  throw new Error(`EVENTLOG_APPEND_TRANSPORT is ${JSON.stringify(value)}, not "channel" or "rest"`);
}

/** Options of `EventLogEventStore`; every one has a default. */
export interface EventLogEventStoreOptions extends ConnectionOptions {
  /** A client to share between stores; otherwise one is built from the connection options. */
  readonly client?: EventLogClient;
  /** `channel` (default, or `EVENTLOG_APPEND_TRANSPORT`): appends go over the process's one
   *  append channel to the service (`channel.ts`), over REST while it cannot be opened;
   *  `rest`: one HTTP request per append. Generations, resumes and pages are REST calls
   *  either way. */
  readonly appendTransport?: AppendTransport;
  /** The channel to append over; default the process's shared one for this service. */
  readonly channel?: AppendChannel;
  /** Unanswered frames on the channel at most (default 64); the channel is shared by the
   *  stores whose options are alike. */
  readonly maxInFlight?: number;
  /** `pipelined` (default) or `per_event`: what `storeEvent` waits for (see the class). */
  readonly durability?: Durability;
  /** Pipelined mode: events a stream may show ahead of the service's acknowledgements, the
   *  `pipeline` its generations are opened with (default 128); past it `storeEvent` waits. */
  readonly pipeline?: number;
  /** The writer lease each generation is opened with (the service's default, 30 s, when
   *  unset); the store renews it every third of it while it lives. */
  readonly leaseSeconds?: number;
  /** Pipelined mode: how long one frame is retried while the service does not answer (or
   *  answers 5xx) before its messages count as lost; default 10 000. */
  readonly giveUpAfterMs?: number;
  /** Recorded on each generation; default `mcp:ts:<pid>`. */
  readonly producer?: string;
  /** Events retained per generation (the service's default when unset). */
  readonly maxEvents?: number;
  /** A generation's time to live after its last write (the service's default when unset). */
  readonly ttlSeconds?: number;
  /** Events per page of a replay (the service's default when unset). */
  readonly pageLimit?: number;
  /** Messages longer than this (UTF-8 bytes) are stored in parts; the service's
   *  `EVENTLOG_MAX_EVENT_BYTES`, 1 MiB by default. */
  readonly maxEventBytes?: number;
  /** A message whose JSON is longer than this (UTF-8 bytes) is not stored (it goes out
   *  unstored); default 16 MiB, the service's `EVENTLOG_MAX_BODY_BYTES` default. */
  readonly maxMessageBytes?: number;
  /** The longest one `storeEvent` waits for the service (per-event: its commit; pipelined:
   *  its generation, and room in the window) before the message goes out unstored. */
  readonly storeTimeoutMs?: number;
  /** After a failure to store, messages go out unstored without asking for this long. */
  readonly pauseAfterFailureMs?: number;
  /** The longest a replay waits for the verdict and its pages before refusing. */
  readonly replayTimeoutMs?: number;
  /** SDK streams, and generations, remembered per session. */
  readonly maxStreams?: number;
  readonly logger?: StoreLogger;
  readonly stats?: StoreStats;
}
