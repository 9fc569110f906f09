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

import { BoundedMap } from "./bounded.js";
import { AppendChannel, ChannelUnavailable } from "./channel.js";
import { type AppendOptions, EventLogClient } from "./client.js";
import type { ConnectionOptions } from "./connection.js";
import { encodeMessage, MessageAssembler } from "./encoding.js";
import {
  Abandoned,
  DeadlineExceeded,
  EventLogError,
  InvalidResponse,
  isRecord,
  Superseded,
  TerminalGeneration,
  ValidationFailed,
} from "./errors.js";
import { DEFAULT_LEASE_SECONDS, LeaseKeeper } from "./lease.js";
import type {
  AppendResult,
  Generation,
  GenerationReason,
  NewEvent,
  ResumeAnswer,
} from "./models.js";
import { StreamNames } from "./names.js";
import { deadline, GenerationPipeline } from "./pipeline.js";
import {
  CROSS_SESSION,
  MALFORMED,
  NOT_STORED,
  type Refusal,
  refusalMessage,
  refusalOf,
  ResumeRefused,
  SHARED_STORE,
} from "./refusal.js";
import { newStoreStats, type StoreLogger, type StoreStats } from "./reporting.js";
import type { EventId, McpEventStore, McpMessage, RequestId, SendEvent, StreamId } from "./sdk.js";
import { GET_STREAM, TransportView } from "./transport.js";

export { GET_STREAM } from "./transport.js";

/** Event ids of messages that went out without being stored start with this. */
export const UNSTORED_PREFIX = "unstored:";

/** What `getStreamIdForEventId` answers for an id this store did not hand out (so the SDK
 *  asks `replayEventsAfter`, which refuses it visibly, rather than answering 400 itself). */
const UNRESOLVED_STREAM = "eventlog:unresolved";
/** The stream a refused resume's connection is registered under: nothing is ever sent to it. */
const REFUSED_STREAM_PREFIX = "eventlog:refused:";
const EVENT_ID = /^([A-Za-z0-9_-]+):(\d+)$/;

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

type Send = SendEvent;

/** This session's writer state for one SDK stream. */
class StreamState {
  generation: string | undefined;
  nextSeq = 1;
  /** A write failed: the generation may have a hole, the next write opens a new one. */
  broken = false;
  /** Pipelined mode: the current generation's writer. */
  pipe: GenerationPipeline | undefined;
  /** Ids of the requests answered on this stream, learned from their responses. */
  readonly answered = new Set<RequestId>();
  private tail: Promise<void> = Promise.resolve();

  /** Wait for the stream's previous holder; the result releases it. */
  acquire(): Promise<() => void> {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const previous = this.tail;
    this.tail = previous.then(() => held);
    return previous.then(() => release);
  }
}

/** What this store knows of a generation it opened. */
interface Owner {
  readonly sdkStream: StreamId;
  broken: boolean;
}

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
  private readonly names = new StreamNames();
  private readonly streams: BoundedMap<StreamId, StreamState>;
  private readonly owners: BoundedMap<string, Owner>;
  private readonly unstored: BoundedMap<string, StreamId>;
  private readonly logger: StoreLogger;
  private readonly producer: string;
  private readonly maxEventBytes: number;
  private readonly maxMessageBytes: number;
  private readonly storeTimeoutMs: number;
  private readonly pauseAfterFailureMs: number;
  private readonly replayTimeoutMs: number;
  private pausedUntil = 0;
  private transport: TransportView | undefined;
  private initializations = 0;
  private durability: Durability;
  private readonly pipeline: number;
  private readonly leases: LeaseKeeper;
  /** The generations this store holds leases of, with the SDK stream each one is written for. */
  private readonly leased = new Map<string, StreamId>();
  /** The lease each generation was opened with, as the service answered. */
  private readonly leaseLengths: BoundedMap<string, number>;

  constructor(private readonly options: EventLogEventStoreOptions = {}) {
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
    this.scope = randomKey();
    this.stats = options.stats ?? newStoreStats();
    this.logger = options.logger ?? console;
    const pid = (globalThis as { process?: { pid?: number } }).process?.pid;
    this.producer = options.producer ?? `mcp:ts:${pid ?? "web"}`;
    this.maxEventBytes = options.maxEventBytes ?? 1_048_576;
    this.maxMessageBytes = options.maxMessageBytes ?? 16 * 1_048_576;
    this.storeTimeoutMs = options.storeTimeoutMs ?? 5_000;
    this.pauseAfterFailureMs = options.pauseAfterFailureMs ?? 1_000;
    this.replayTimeoutMs = options.replayTimeoutMs ?? 10_000;
    const max = options.maxStreams ?? 10_000;
    this.streams = new BoundedMap(max);
    this.owners = new BoundedMap(max);
    this.unstored = new BoundedMap(max);
    this.leaseLengths = new BoundedMap(max);
    this.durability = options.durability ?? "pipelined";
    if (this.durability !== "pipelined" && this.durability !== "per_event") {
      throw new Error(
        `durability is ${JSON.stringify(this.durability)}: "pipelined" or "per_event"`,
      );
    }
    this.pipeline = options.pipeline ?? DEFAULT_PIPELINE;
    if (!Number.isInteger(this.pipeline) || this.pipeline < 1) {
      throw new RangeError(`pipeline is ${this.pipeline}: a whole number of events, at least 1`);
    }
    this.leases = LeaseKeeper.of(this.client, this.channel, this.logger);
  }

  /** What `storeEvent` waits for: `pipelined`, or `per_event` (chosen, or because the
   *  service knows no pipeline window). */
  get mode(): Durability {
    return this.durability;
  }

  /** The pipelined writer of `sdkStream`'s current generation (tests, diagnostics). */
  pipelineOf(sdkStream: StreamId): GenerationPipeline | undefined {
    return this.streams.peek(sdkStream)?.pipe;
  }

  /**
   * Wait up to `timeoutMs` for every message handed out so far to be acknowledged; whether
   * they all were (a pipeline that broke, or the time running out, is false). Per-event
   * mode has nothing outstanding.
   */
  async flush(timeoutMs = 10_000): Promise<boolean> {
    const signal = AbortSignal.timeout(timeoutMs);
    const pipes: GenerationPipeline[] = [];
    for (const state of this.streams.values()) if (state.pipe !== undefined) pipes.push(state.pipe);
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
    for (const generation of this.leased.keys()) this.leases.release(generation);
    this.leased.clear();
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
    if (this.transport !== undefined && this.transport.inner !== view.inner) {
      throw new Error("an EventLogEventStore serves one session: build one store per transport");
    }
    this.transport = view;
    const missing = view.missing();
    if (missing.length > 0) {
      this.logger.warn(
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
    const state = this.state(streamId);
    this.learn(state, message);
    // One append at a time per stream: the local seq counter follows append order.
    const release = await state.acquire();
    try {
      return await this.write(streamId, state, message);
    } finally {
      release();
    }
  }

  /** The SDK stream an event id belongs to (for the SDK's one-connection-per-stream check).
   *  Never undefined (the SDK would answer 400, which a 2.x client's explicit resumption never
   *  hears): an id this store did not hand out is refused by `replayEventsAfter` instead. */
  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    if (eventId.startsWith(UNSTORED_PREFIX))
      return this.unstored.peek(eventId) ?? UNRESOLVED_STREAM;
    const token = tokenOf(eventId);
    const owner = token === undefined ? undefined : this.owners.peek(token);
    return owner?.sdkStream ?? UNRESOLVED_STREAM;
  }

  /** Send the messages missed after `lastEventId` if, and only if, it may resume; the
   *  connection ends at once when nothing more can come on it (see the class). */
  async replayEventsAfter(lastEventId: EventId, { send }: { send: Send }): Promise<StreamId> {
    this.stats.replays += 1;
    const streamId = await this.decide(lastEventId, send);
    this.transport?.endIfFinished(streamId);
    return streamId;
  }

  private async decide(lastEventId: EventId, send: Send): Promise<StreamId> {
    if (this.initializations > 1) {
      return this.refuse(lastEventId, undefined, SHARED_STORE, send);
    }
    if (lastEventId.startsWith(UNSTORED_PREFIX)) {
      return this.refuse(lastEventId, this.unstored.peek(lastEventId), NOT_STORED, send);
    }
    const token = tokenOf(lastEventId);
    if (token === undefined) return this.refuse(lastEventId, undefined, MALFORMED, send);
    const owner = this.owners.get(token);
    if (owner?.broken) return this.refuse(lastEventId, owner.sdkStream, NOT_STORED, send);
    // Hold the stream while replaying: a message stored meanwhile waits, and reaches the
    // client live on the resumed connection, which the SDK registers as soon as this returns.
    const release = owner === undefined ? undefined : await this.state(owner.sdkStream).acquire();
    try {
      const pipe = owner === undefined ? undefined : this.state(owner.sdkStream).pipe;
      if (owner !== undefined && pipe?.generation === token) {
        // What this process handed out of the generation is acknowledged before the service
        // is asked, so the verdict covers every id the client may hold.
        if (!(await pipe.settle(pipe.handed, AbortSignal.timeout(this.replayTimeoutMs)))) {
          const why =
            pipe.error ??
            new DeadlineExceeded(
              0,
              DeadlineExceeded.code,
              "the messages handed out were not acknowledged in time",
            );
          const refusal = owner.broken || pipe.error !== undefined ? NOT_STORED : refusalOf(why);
          return await this.refuse(lastEventId, owner.sdkStream, refusal, send);
        }
      }
      return await this.replay(lastEventId, owner?.sdkStream, release !== undefined, send);
    } finally {
      release?.();
    }
  }

  private async replay(
    lastEventId: string,
    ownStream: StreamId | undefined,
    held: boolean,
    send: Send,
  ): Promise<StreamId> {
    const signal = AbortSignal.timeout(this.replayTimeoutMs);
    let answer: ResumeAnswer;
    try {
      const streamId =
        ownStream === undefined ? undefined : await this.names.name(this.scope, ownStream);
      answer = await this.client.resume(lastEventId, {
        streamId,
        limit: this.options.pageLimit,
        signal,
      });
    } catch (error) {
      return this.refuse(lastEventId, ownStream, refusalOf(error), send);
    }
    const named = answer.streamId === null ? undefined : this.names.parse(answer.streamId);
    const mine = named?.scope === this.scope ? named.sdkStream : undefined;
    const sdkStream = ownStream ?? mine;
    if (ownStream === undefined && answer.streamId !== null && mine === undefined) {
      // A real token of another session (or of a stream no store of ours wrote): whatever
      // the verdict, this session may not see it.
      return this.refuse(lastEventId, undefined, CROSS_SESSION, send);
    }
    if (answer.verdict !== "resume" || sdkStream === undefined || answer.generation === null) {
      return this.refuse(lastEventId, sdkStream, answer, send);
    }
    if (held) return this.deliver(lastEventId, sdkStream, answer, false, send, signal);
    const release = await this.state(sdkStream).acquire();
    try {
      return await this.deliver(lastEventId, sdkStream, answer, true, send, signal);
    } finally {
      release();
    }
  }

  /** Send a resume's events, page after page; `catchUp`: the stream was not held while the
   *  verdict was asked, so read on past the answer's last page once more. */
  private async deliver(
    lastEventId: string,
    sdkStream: StreamId,
    answer: ResumeAnswer,
    catchUp: boolean,
    send: Send,
    signal: AbortSignal,
  ): Promise<StreamId> {
    const assembler = new MessageAssembler();
    let sent = 0;
    let lastSeq = Number(lastEventId.slice(lastEventId.lastIndexOf(":") + 1));
    const emit = async (event: (typeof answer.events)[number]): Promise<void> => {
      lastSeq = event.seq;
      const replayed = assembler.push(event);
      if (replayed === undefined) return;
      await send(replayed.id, replayed.message as McpMessage);
      sent += 1;
    };
    try {
      for (const event of answer.events) await emit(event);
      const next = answer.nextAfter ?? (catchUp ? lastSeq : null);
      if (next !== null) {
        const generation = answer.generation ?? "";
        const pages = this.client.eventsAfter(generation, next, {
          limit: this.options.pageLimit,
          signal,
        });
        for await (const event of pages) await emit(event);
      }
    } catch (error) {
      // What was sent is a true prefix; fail the request rather than leave it with a hole.
      this.stats.replayedMessages += sent;
      return this.refuse(lastEventId, sdkStream, refusalOf(error), send);
    }
    this.stats.resumed += 1;
    this.stats.replayedMessages += sent;
    return sdkStream;
  }

  /** Fail the client's request(s) on `sdkStream` visibly: each with its own id, or, when no
   *  request can be named, one error without an id (see the class). */
  private async refuse(
    lastEventId: string,
    sdkStream: StreamId | undefined,
    refusal: Refusal,
    send: Send,
  ): Promise<StreamId> {
    this.stats.refused += 1;
    const what = `not resuming ${JSON.stringify(lastEventId)}: ${refusal.verdict}/${refusal.reason} (${refusal.detail})`;
    const requests = sdkStream === undefined ? [] : this.requestsOf(sdkStream);
    if (requests.length === 0) {
      const why =
        sdkStream === undefined || sdkStream === GET_STREAM || this.transport?.knowsRequests
          ? ""
          : "; attach the store to its transport (store.attach(transport)) so a refusal can name the request";
      this.logger.warn(`mcp-eventlog: ${what}; no request to name, sent without an id${why}`);
      this.transport?.report(new ResumeRefused(lastEventId, refusal));
      // No event id: the refusal is not stored and never becomes a Last-Event-ID.
      await send("", refusalMessage(undefined, refusal));
    } else {
      this.logger.info(`mcp-eventlog: ${what}`);
      for (const id of requests) await send("", refusalMessage(id, refusal));
    }
    return REFUSED_STREAM_PREFIX + randomKey();
  }

  /** The ids of the requests whose answers travel on `sdkStream`. */
  private requestsOf(sdkStream: StreamId): RequestId[] {
    const ids = new Set<RequestId>(this.streams.peek(sdkStream)?.answered ?? []);
    for (const id of this.transport?.requestsOn(sdkStream) ?? []) ids.add(id);
    return [...ids];
  }

  private state(sdkStream: StreamId): StreamState {
    let state = this.streams.get(sdkStream);
    if (state === undefined) {
      state = new StreamState();
      this.streams.set(sdkStream, state);
    }
    return state;
  }

  /** Remember what a message tells: the request it answers; a second session's start. */
  private learn(state: StreamState, message: McpMessage): void {
    if (!("id" in message) || !("result" in message || "error" in message)) return;
    const id: unknown = message.id;
    if (typeof id === "string" || typeof id === "number") state.answered.add(id);
    const result: unknown = "result" in message ? message.result : undefined;
    if (
      isRecord(result) &&
      typeof result["protocolVersion"] === "string" &&
      isRecord(result["serverInfo"])
    ) {
      this.initializations += 1;
      if (this.initializations === 2) {
        this.logger.error(
          "mcp-eventlog: one EventLogEventStore is serving a second MCP session; its sessions " +
            "can no longer be kept apart, so every resume is refused. Build one store per transport.",
        );
      }
    }
  }

  private async write(
    sdkStream: StreamId,
    state: StreamState,
    message: McpMessage,
  ): Promise<EventId> {
    let events: NewEvent[];
    try {
      events = encodeMessage(message, this.maxEventBytes);
    } catch (error) {
      return this.unstoredId(sdkStream, state, describe(error), false);
    }
    const size = messageBytes(events, this.maxMessageBytes);
    if (size > this.maxMessageBytes) {
      return this.unstoredId(sdkStream, state, `a message of ${size} bytes`, false);
    }
    if (Date.now() < this.pausedUntil) return this.unstoredId(sdkStream, state, "", false);
    // The timer is made only when the write has to wait (most pipelined writes never do).
    const signal = deadline(this.storeTimeoutMs);
    try {
      const pipelined = this.durability === "pipelined";
      if (state.generation === undefined || state.broken || (pipelined && !state.pipe)) {
        await this.open(
          sdkStream,
          state,
          signal(),
          state.generation === undefined ? undefined : "reset",
        );
      }
      let id: string | undefined;
      if (state.pipe !== undefined) {
        id = await this.hand(sdkStream, state, events, signal);
      } else {
        id = (await this.append(sdkStream, state, events, signal())).at(-1);
        if (state.generation !== undefined) this.leases.renewed(state.generation);
      }
      if (id === undefined) return this.unstoredId(sdkStream, state, "no id came back", false);
      this.stats.stored += 1;
      this.leaseAfter(sdkStream, state, message);
      return id;
    } catch (error) {
      // The service did not take the message in time: this generation's writer stops (what
      // it had handed out and not stored is lost, visibly), the next write opens a new one.
      const pipe = state.pipe;
      if (pipe !== undefined && pipe.error === undefined) pipe.close(asEventLogError(error));
      return this.unstoredId(sdkStream, state, describe(error), pausesStoring(error));
    }
  }

  /** Pipelined: hand the message to the generation's writer; its id once handed. A
   *  generation fenced, finished or abandoned before the message was handed (so before its
   *  id went out) continues in a new generation, as a per-event write does. */
  private async hand(
    sdkStream: StreamId,
    state: StreamState,
    events: readonly NewEvent[],
    signal: () => AbortSignal,
  ): Promise<EventId> {
    let pipe = state.pipe as GenerationPipeline;
    let seq: number;
    try {
      seq = await pipe.hand(events, signal);
    } catch (error) {
      const refused = pipe.error;
      if (refused === undefined || error !== refused || !fenced(refused)) throw error;
      this.logger.warn(
        `mcp-eventlog: generation ${pipe.generation} refused an append (${refused.code}); opening a new one`,
      );
      await this.open(sdkStream, state, signal(), "reset");
      pipe = state.pipe as GenerationPipeline;
      seq = await pipe.hand(events, signal);
    }
    return `${pipe.generation}:${seq}`;
  }

  /** Keep the lease of the stream's generation while it may still be written, and let it go
   *  once the stream's requests are all answered (the response is stored). */
  private leaseAfter(sdkStream: StreamId, state: StreamState, message: McpMessage): void {
    const generation = state.generation;
    if (generation === undefined) return;
    const answers = "id" in message && ("result" in message || "error" in message);
    if (answers && sdkStream !== GET_STREAM) {
      const requests = this.transport?.requestsOn(sdkStream) ?? [];
      if (requests.every((id) => state.answered.has(id))) {
        this.releaseLease(generation);
        return;
      }
    }
    if (!this.leased.has(generation)) {
      this.holdLease(sdkStream, state, generation, this.leaseSeconds(generation));
    }
  }

  private leaseSeconds(generation: string): number {
    return this.leaseLengths.get(generation) ?? this.options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  }

  private holdLease(
    sdkStream: StreamId,
    state: StreamState,
    generation: string,
    seconds: number,
  ): void {
    this.leased.set(generation, sdkStream);
    this.leases.hold(generation, seconds, (error) => {
      this.leased.delete(generation);
      if (state.generation !== generation) return;
      this.logger.warn(
        `mcp-eventlog: the writer lease of generation ${generation} (SDK stream ${sdkStream}) ` +
          `was refused (${error.code}); the next message opens a new generation`,
      );
      state.broken = true;
      const pipe = state.pipe;
      if (pipe?.generation === generation && pipe.error === undefined) pipe.close(error);
    });
  }

  private releaseLease(generation: string): void {
    if (!this.leased.delete(generation)) return;
    this.leases.release(generation);
  }

  /** The pipeline of `sdkStream` broke: its stream is spoiled (see `GenerationPipeline`). */
  private broke(
    sdkStream: StreamId,
    state: StreamState,
    pipe: GenerationPipeline,
    error: EventLogError,
  ): void {
    this.releaseLease(pipe.generation);
    if (state.pipe === pipe) state.broken = true;
    if (pipe.lost === 0) return;
    this.stats.lost += pipe.lost;
    // Set again (not only flagged) so the mark survives even if the entry was forgotten.
    this.owners.set(pipe.generation, { sdkStream, broken: true });
    if (pausesStoring(error)) this.pausedUntil = Date.now() + this.pauseAfterFailureMs;
    this.logger.warn(
      `mcp-eventlog: ${pipe.lost} message(s) of SDK stream ${sdkStream} went out and were not ` +
        `stored (${error.code}: ${error.detail}); a resume from before them is refused`,
    );
  }

  private async append(
    sdkStream: StreamId,
    state: StreamState,
    events: readonly NewEvent[],
    signal: AbortSignal,
  ): Promise<readonly string[]> {
    try {
      const result = await this.sendAppend(state.generation ?? "", events, {
        firstSeq: state.nextSeq,
        signal,
      });
      state.nextSeq += events.length;
      return result.eventIds;
    } catch (error) {
      if (!(error instanceof Superseded || error instanceof TerminalGeneration)) throw error;
      // Someone (an operator, another writer) ended this generation: continue in a new one,
      // so the old ids reset rather than resume into different events.
      this.logger.warn(
        `mcp-eventlog: generation ${state.generation} refused an append (${error.code}); opening a new one`,
      );
      await this.open(sdkStream, state, signal, "reset");
      const result = await this.sendAppend(state.generation ?? "", events, {
        firstSeq: 1,
        signal,
      });
      state.nextSeq = 1 + events.length;
      return result.eventIds;
    }
  }

  /** Append over the channel, or over REST when there is none or it cannot be opened
   *  (counted in `channelFallbacks`, logged once per outage of the channel). */
  private async sendAppend(
    generation: string,
    events: readonly NewEvent[],
    options: AppendOptions,
  ): Promise<AppendResult> {
    if (this.channel !== undefined) {
      try {
        return await this.channel.append({ generation, events, ...options });
      } catch (error) {
        if (!(error instanceof ChannelUnavailable)) throw error;
        this.stats.channelFallbacks += 1;
        if (!LOGGED_OUTAGES.has(error)) {
          LOGGED_OUTAGES.add(error);
          this.logger.warn(
            `mcp-eventlog: ${error.detail}; appending over REST for ${this.channel.retryAfterMs} ms`,
          );
        }
      }
    }
    return this.client.append(generation, events, options);
  }

  private async open(
    sdkStream: StreamId,
    state: StreamState,
    signal: AbortSignal,
    reason: GenerationReason | undefined,
  ): Promise<void> {
    const previous = state.pipe;
    if (previous !== undefined && previous.error === undefined) {
      // What the old generation's writer handed out is stored before the new generation
      // fences it (bounded by the write's deadline).
      await previous.settle(previous.handed, signal);
      previous.close(new Superseded(409, Superseded.code, "the store opened a new generation"));
    }
    const name = await this.names.name(this.scope, sdkStream);
    const options = {
      reason,
      producer: this.producer,
      maxEvents: this.options.maxEvents,
      ttlSeconds: this.options.ttlSeconds,
      leaseSeconds: this.options.leaseSeconds,
      pipeline: this.durability === "pipelined" ? this.pipeline : undefined,
      signal,
    };
    let generation: Generation;
    try {
      generation = await this.client.openGeneration(name, options);
    } catch (error) {
      // A service without writer leases refuses the fields (nothing was opened): such a
      // service would answer a claim past its tail `invalid`, so this store writes per event.
      if (!(error instanceof ValidationFailed) || options.pipeline === undefined) throw error;
      this.logger.warn(
        `mcp-eventlog: the service does not know pipeline windows (${error.detail}); ` +
          "storing every message before it is sent (durability per_event)",
      );
      this.durability = "per_event";
      generation = await this.client.openGeneration(name, {
        ...options,
        pipeline: undefined,
        leaseSeconds: undefined,
      });
    }
    if (state.generation !== undefined) this.releaseLease(state.generation);
    state.generation = generation.token;
    state.nextSeq = 1;
    state.broken = false;
    state.pipe = undefined;
    this.owners.set(generation.token, { sdkStream, broken: false });
    if (generation.leaseSeconds !== null) {
      this.leaseLengths.set(generation.token, generation.leaseSeconds);
    }
    if (this.durability === "pipelined") {
      const pipe: GenerationPipeline = new GenerationPipeline(
        generation.token,
        (token, events, firstSeq) => this.sendAppend(token, events, { firstSeq }),
        {
          window: generation.pipeline > 0 ? generation.pipeline : this.pipeline,
          giveUpAfterMs: this.options.giveUpAfterMs,
          onBroken: (broken, error) => this.broke(sdkStream, state, broken, error),
          onAcknowledged: (acked) => this.leases.renewed(acked.generation),
        },
      );
      state.pipe = pipe;
    }
  }

  /** The id of a message that goes out unstored; spoils its stream (see the class). */
  private unstoredId(
    sdkStream: StreamId,
    state: StreamState,
    detail: string,
    pause: boolean,
  ): EventId {
    state.broken = true;
    if (state.generation !== undefined) {
      // Set again (not only flagged) so the mark survives even if the entry was forgotten.
      this.owners.set(state.generation, { sdkStream, broken: true });
    }
    if (pause) this.pausedUntil = Date.now() + this.pauseAfterFailureMs;
    this.stats.storeFailures += 1;
    if (detail) {
      this.logger.warn(
        `mcp-eventlog: a message of SDK stream ${sdkStream} went out unstored (${detail}); ` +
          "a resume from before it will be refused",
      );
    }
    const id = UNSTORED_PREFIX + randomKey();
    this.unstored.set(id, sdkStream);
    return id;
  }
}

/** The channel outages already logged (one line per outage, for every store of the process). */
const LOGGED_OUTAGES = new WeakSet<ChannelUnavailable>();

/** Whether a failure to store says the service is down or is not the service (so stop
 *  asking for a moment). */
function pausesStoring(error: unknown): boolean {
  if (error instanceof InvalidResponse) return true;
  return !(error instanceof EventLogError) || error.status === 0 || error.status >= 500;
}

/** The UTF-8 size of a message's events, or a bound of it when that is under `limit`. */
function messageBytes(events: readonly NewEvent[], limit: number): number {
  const units = events.reduce((sum, event) => sum + event.data.length, 0);
  // At most 3 UTF-8 bytes per UTF-16 unit: most messages need no encoding to be measured.
  if (units * 3 <= limit) return units * 3;
  const encoder = new TextEncoder();
  return events.reduce((sum, event) => sum + encoder.encode(event.data).length, 0);
}

/** Whether an append was refused because the generation is no longer writable. */
function fenced(error: EventLogError): boolean {
  return (
    error instanceof Superseded || error instanceof TerminalGeneration || error instanceof Abandoned
  );
}

function asEventLogError(error: unknown): EventLogError {
  if (error instanceof EventLogError) return error;
  return new DeadlineExceeded(0, DeadlineExceeded.code, describe(error), { cause: error });
}

function tokenOf(eventId: string): string | undefined {
  return eventId.length <= 300 ? EVENT_ID.exec(eventId)?.[1] : undefined;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** 128 random bits, URL-safe, without `.` or `:`. */
function randomKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}
