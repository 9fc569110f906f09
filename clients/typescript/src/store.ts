/**
 * `EventLogEventStore`: the MCP TypeScript SDK's `EventStore`, backed by the event-log service,
 * for both SDK generations (`@modelcontextprotocol/sdk` 1.x, `@modelcontextprotocol/server`
 * 2.x on its legacy, session-based path for the revisions 2025-03-26 … 2025-11-25).
 *
 * One store serves one MCP session, like the transport it is given to (the SDK builds one
 * `StreamableHTTPServerTransport` per session, each with its `eventStore` option):
 *
 * ```ts
 * const store = new EventLogEventStore({ baseUrl: "http://127.0.0.1:8080" });
 * const transport = store.attach(
 *   new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, eventStore: store }),
 * );
 * ```
 */

import { AppendChannel } from "./channel.js";
import { EventLogClient } from "./client.js";
import { LeaseKeeper } from "./lease.js";
import type { GenerationPipeline } from "./pipeline.js";
import { newStoreStats, type StoreStats } from "./reporting.js";
import type { EventId, McpEventStore, McpMessage, SendEvent, StreamId } from "./sdk.js";
import { StreamLeases } from "./store-leases.js";
import {
  defaultAppendTransport,
  DEFAULT_PIPELINE,
  type Durability,
  type EventLogEventStoreOptions,
} from "./store-options.js";
import { StoreReplay } from "./store-replay.js";
import { SessionBook, tokenOf, UNSTORED_PREFIX } from "./store-session.js";
import { StoreWriter } from "./store-writer.js";
import { TransportView } from "./transport.js";

export {
  type AppendTransport,
  DEFAULT_PIPELINE,
  defaultAppendTransport,
  type Durability,
  type EventLogEventStoreOptions,
} from "./store-options.js";
export { UNSTORED_PREFIX } from "./store-session.js";
export { GET_STREAM } from "./transport.js";

/** What `getStreamIdForEventId` answers for an id this store did not hand out (so the SDK
 *  asks `replayEventsAfter`, which refuses it visibly, rather than answering 400 itself). */
const UNRESOLVED_STREAM = "eventlog:unresolved";

/**
 * Stores one MCP session's SSE events in the event-log service, and resumes only safely.
 *
 * - Each SDK stream gets a generation when it is first written; every message is appended
 *   with `firstSeq` from a local counter (so a retried append can never be stored twice) and
 *   its id is the service's `<token>:<seq>`. Priming events are stored and never replayed.
 * - Service streams are named `mcp.<scope>.<sdk stream>` (see `names.ts`), `scope` being this
 *   store's random key: one store per session keeps sessions apart.
 * - A failure to store never fails the SDK: the message goes out live with an id starting
 *   `unstored:`, the failure is logged and counted, and the stream is spoiled: a resume from
 *   any id before it is refused, the next write opens a new generation.
 * - `replayEventsAfter` asks the service for a verdict. `resume`: the missed messages are
 *   sent in order, across pages. Anything else fails the client's request with a JSON-RPC
 *   error `RESUME_REFUSED` carrying the request's own id (learned from the attached
 *   transport, or from the stored response), or, when no request can be named, throws
 *   `ResumeRefused` (the SDK answers HTTP 500). Nothing of another session is ever sent.
 *
 * `durability` says what `storeEvent` waits for (docs/clients-typescript.md has the promises):
 *
 * - `"pipelined"` (default): the message gets the stream's next id at once and is handed, in
 *   order, to the generation's writer (`GenerationPipeline`), which appends behind it over
 *   the channel, several messages per frame; `storeEvent` returns then. At most `pipeline`
 *   events of a stream are unacknowledged (declared when its generation is opened): past
 *   that, `storeEvent` waits for the service. A dropped channel resends from the first
 *   unacknowledged frame (stored once, by `firstSeq`). A replay in this process first waits
 *   for what it handed out of that generation to be acknowledged. If the process dies, or a
 *   frame cannot be stored, the messages it had shown and not stored are lost, visibly: a
 *   resume from one is answered `reset` (`lost_tail`, `abandoned` or `superseded`), never
 *   `invalid`, never a splice.
 * - `"per_event"`: `storeEvent` returns after the service committed the message: one round
 *   trip and one durable commit per message, which the SDK awaits before it sends the
 *   message (docs/performance.md has what that costs). A message the client sees is stored.
 *
 * Either way the store renews the writer leases of the generations it writes while it lives,
 * however long a tool stays silent (`LeaseKeeper`: every third of the lease, all of them at
 * once on the channel); when the process dies the service marks them abandoned after the
 * lease, and their readers are told. A request stream's lease stops being renewed once its
 * response is stored: a resume of it after the lease is answered `reset`/`abandoned` (the
 * client re-issues the request). `close()` stops renewing them all.
 */
export class EventLogEventStore implements McpEventStore {
  readonly client: EventLogClient;
  /** The append channel, or undefined when this store appends over REST only. */
  readonly channel: AppendChannel | undefined;
  /** This session's random key in the service's stream names. */
  readonly scope: string;
  readonly stats: StoreStats;
  private readonly book: SessionBook;
  private readonly leases: StreamLeases;
  private readonly writer: StoreWriter;
  private readonly replays: StoreReplay;

  constructor(options: EventLogEventStoreOptions = {}) {
    this.client = options.client ?? new EventLogClient(options);
    const transport = options.appendTransport ?? defaultAppendTransport();
    const connection = this.client.connection;
    this.channel =
      transport === "rest"
        ? undefined
        : (options.channel ??
          AppendChannel.shared({
            baseUrl: connection.baseUrl,
            key: connection.key,
            timeoutMs: connection.timeoutMs,
            maxResponseBytes: connection.maxResponseBytes,
            retry: connection.retry,
            maxInFlight: options.maxInFlight,
          }));
    this.stats = options.stats ?? newStoreStats();
    const logger = options.logger ?? console;
    const max = options.maxStreams ?? 10_000;
    this.book = new SessionBook(max, this.stats, logger);
    this.scope = this.book.scope;
    const durability = options.durability ?? "pipelined";
    if (durability !== "pipelined" && durability !== "per_event") {
      throw new Error(`durability is ${JSON.stringify(durability)}: "pipelined" or "per_event"`);
    }
    const pipeline = options.pipeline ?? DEFAULT_PIPELINE;
    if (!Number.isInteger(pipeline) || pipeline < 1) {
      throw new RangeError(`pipeline is ${pipeline}: a whole number of events, at least 1`);
    }
    const keeper = LeaseKeeper.of(this.client, this.channel, logger);
    this.leases = new StreamLeases(keeper, logger, options.leaseSeconds, max);
    this.writer = new StoreWriter(
      this.client,
      this.channel,
      this.book,
      this.leases,
      options,
      durability,
      pipeline,
    );
    this.replays = new StoreReplay(
      this.client,
      this.book,
      options.pageLimit,
      options.replayTimeoutMs ?? 10_000,
    );
  }

  /** What `storeEvent` waits for: `pipelined`, or `per_event` (chosen, or because the
   *  service knows no pipeline window). */
  get mode(): Durability {
    return this.writer.durability;
  }

  /** The pipelined writer of `sdkStream`'s current generation (tests, diagnostics). */
  pipelineOf(sdkStream: StreamId): GenerationPipeline | undefined {
    return this.book.streams.peek(sdkStream)?.pipe;
  }

  /**
   * Wait up to `timeoutMs` for every message handed out so far to be acknowledged; whether
   * they all were (a pipeline that broke, or the time running out, is false). Per-event
   * mode has nothing outstanding.
   */
  async flush(timeoutMs = 10_000): Promise<boolean> {
    const signal = AbortSignal.timeout(timeoutMs);
    const pipes: GenerationPipeline[] = [];
    for (const state of this.book.streams.values()) {
      if (state.pipe !== undefined) pipes.push(state.pipe);
    }
    const settled = await Promise.all(pipes.map((pipe) => pipe.settle(pipe.handed, signal)));
    return settled.every(Boolean);
  }

  /**
   * The session is over: wait up to `settleMs` for what was handed out to be acknowledged,
   * then stop renewing this store's leases (the service marks the generations abandoned
   * after their lease). A later `storeEvent` still works, and holds its lease again.
   */
  async close(settleMs = 5_000): Promise<void> {
    await this.flush(settleMs);
    this.leases.releaseAll();
  }

  /**
   * Bind the store to the session's transport, and return the transport.
   *
   * The store then reads which requests each SDK stream carries (the transport names a POST's
   * stream by a random UUID, not by the request id), so a refused resume of a request still
   * running fails that request. Throws when the transport was built with another event store,
   * or when this store already serves another transport: one store per session.
   */
  attach<T extends object>(transport: T): T {
    const view = TransportView.of(transport, this);
    const attached = this.book.transport;
    if (attached !== undefined && attached.inner !== view.inner) {
      throw new Error("an EventLogEventStore serves one session: build one store per transport");
    }
    this.book.transport = view;
    const missing = view.missing();
    if (missing.length > 0) {
      this.book.logger.warn(
        `mcp-eventlog: this SDK's transport has no ${missing.join(" and no ")}; a refused ` +
          "resume can name only requests that were answered, and a finished stream's resume " +
          "may stay open",
      );
    }
    return transport;
  }

  /** Append one event to the stream's generation; return its `<token>:<seq>` id. Never throws
   *  for the service's sake: an unstored message gets an `unstored:` id (see the class). */
  async storeEvent(streamId: StreamId, message: McpMessage): Promise<EventId> {
    const state = this.book.state(streamId);
    this.book.learn(state, message);
    // One append at a time per stream: the local seq counter follows append order.
    const release = await state.acquire();
    try {
      return await this.writer.write(streamId, state, message);
    } finally {
      release();
    }
  }

  /** The SDK stream an event id belongs to (for the SDK's one-connection-per-stream check).
   *  Never undefined (the SDK would answer 400, which a 2.x client's explicit resumption never
   *  hears): an id this store did not hand out is refused by `replayEventsAfter` instead. */
  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    if (eventId.startsWith(UNSTORED_PREFIX)) {
      return this.book.unstored.peek(eventId) ?? UNRESOLVED_STREAM;
    }
    const token = tokenOf(eventId);
    const owner = token === undefined ? undefined : this.book.owners.peek(token);
    return owner?.sdkStream ?? UNRESOLVED_STREAM;
  }

  /** Send the messages missed after `lastEventId` if, and only if, it may resume; the
   *  connection ends at once when nothing more can come on it (see the class). */
  async replayEventsAfter(lastEventId: EventId, { send }: { send: SendEvent }): Promise<StreamId> {
    this.stats.replays += 1;
    const streamId = await this.replays.decide(lastEventId, send);
    this.book.transport?.endIfFinished(streamId);
    return streamId;
  }
}
