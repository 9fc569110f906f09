/**
 * The writing half of `EventLogEventStore`: each message appended to its SDK stream's
 * generation, per event or handed to the generation's pipelined writer; a generation opened
 * when there is none or the last one is spoiled; a failure turned into an `unstored:` id,
 * never an error for the SDK. The store's class comment has the promises.
 */

import { type AppendChannel, ChannelUnavailable } from "./channel.js";
import type { AppendOptions, EventLogClient } from "./client.js";
import { encodeMessage } from "./encoding.js";
import {
  Abandoned,
  DeadlineExceeded,
  EventLogError,
  InvalidResponse,
  Superseded,
  TerminalGeneration,
  ValidationFailed,
} from "./errors.js";
import type { AppendResult, Generation, GenerationReason, NewEvent } from "./models.js";
import { deadline, GenerationPipeline } from "./pipeline.js";
import type { EventId, McpMessage, StreamId } from "./sdk.js";
import type { StreamLeases } from "./store-leases.js";
import type { Durability, EventLogEventStoreOptions } from "./store-options.js";
import {
  describe,
  randomKey,
  type SessionBook,
  type StreamState,
  UNSTORED_PREFIX,
} from "./store-session.js";

/** Stores the messages of one session's SDK streams (see the module). */
export class StoreWriter {
  private readonly producer: string;
  private readonly maxEventBytes: number;
  private readonly maxMessageBytes: number;
  private readonly storeTimeoutMs: number;
  private readonly pauseAfterFailureMs: number;
  private pausedUntil = 0;

  constructor(
    private readonly client: EventLogClient,
    private readonly channel: AppendChannel | undefined,
    private readonly book: SessionBook,
    private readonly leases: StreamLeases,
    private readonly options: EventLogEventStoreOptions,
    /** What `storeEvent` waits for; `per_event` once the service knows no pipeline window. */
    public durability: Durability,
    private readonly pipeline: number,
  ) {
    const pid = (globalThis as { process?: { pid?: number } }).process?.pid;
    this.producer = options.producer ?? `mcp:ts:${pid ?? "web"}`;
    this.maxEventBytes = options.maxEventBytes ?? 1_048_576;
    this.maxMessageBytes = options.maxMessageBytes ?? 16 * 1_048_576;
    this.storeTimeoutMs = options.storeTimeoutMs ?? 5_000;
    this.pauseAfterFailureMs = options.pauseAfterFailureMs ?? 1_000;
  }

  /** Store `message` on `sdkStream` (its holder has the stream); its id, or an `unstored:` one. */
  async write(sdkStream: StreamId, state: StreamState, message: McpMessage): Promise<EventId> {
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
        if (state.generation !== undefined) this.leases.keeper.renewed(state.generation);
      }
      if (id === undefined) return this.unstoredId(sdkStream, state, "no id came back", false);
      this.book.stats.stored += 1;
      this.leases.after(sdkStream, state, message, this.book.transport);
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
      this.book.logger.warn(
        `mcp-eventlog: generation ${pipe.generation} refused an append (${refused.code}); opening a new one`,
      );
      await this.open(sdkStream, state, signal(), "reset");
      pipe = state.pipe as GenerationPipeline;
      seq = await pipe.hand(events, signal);
    }
    return `${pipe.generation}:${seq}`;
  }

  /** The pipeline of `sdkStream` broke: its stream is spoiled (see `GenerationPipeline`). */
  private broke(
    sdkStream: StreamId,
    state: StreamState,
    pipe: GenerationPipeline,
    error: EventLogError,
  ): void {
    this.leases.release(pipe.generation);
    if (state.pipe === pipe) state.broken = true;
    if (pipe.lost === 0) return;
    this.book.stats.lost += pipe.lost;
    this.book.spoil(pipe.generation, sdkStream);
    if (pausesStoring(error)) this.pausedUntil = Date.now() + this.pauseAfterFailureMs;
    this.book.logger.warn(
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
      this.book.logger.warn(
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
        this.book.stats.channelFallbacks += 1;
        if (!LOGGED_OUTAGES.has(error)) {
          LOGGED_OUTAGES.add(error);
          this.book.logger.warn(
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
    const generation = await this.openGeneration(sdkStream, signal, reason);
    if (state.generation !== undefined) this.leases.release(state.generation);
    state.generation = generation.token;
    state.nextSeq = 1;
    state.broken = false;
    state.pipe = undefined;
    this.book.owners.set(generation.token, { sdkStream, broken: false });
    this.leases.opened(generation.token, generation.leaseSeconds);
    if (this.durability === "pipelined") {
      const pipe: GenerationPipeline = new GenerationPipeline(
        generation.token,
        (token, events, firstSeq) => this.sendAppend(token, events, { firstSeq }),
        {
          window: generation.pipeline > 0 ? generation.pipeline : this.pipeline,
          giveUpAfterMs: this.options.giveUpAfterMs,
          onBroken: (broken, error) => this.broke(sdkStream, state, broken, error),
          onAcknowledged: (acked) => this.leases.keeper.renewed(acked.generation),
        },
      );
      state.pipe = pipe;
    }
  }

  /** A new generation of `sdkStream`'s service stream; per event from then on when the
   *  service knows no pipeline window. */
  private async openGeneration(
    sdkStream: StreamId,
    signal: AbortSignal,
    reason: GenerationReason | undefined,
  ): Promise<Generation> {
    const name = await this.book.names.name(this.book.scope, sdkStream);
    const options = {
      reason,
      producer: this.producer,
      maxEvents: this.options.maxEvents,
      ttlSeconds: this.options.ttlSeconds,
      leaseSeconds: this.options.leaseSeconds,
      pipeline: this.durability === "pipelined" ? this.pipeline : undefined,
      signal,
    };
    try {
      return await this.client.openGeneration(name, options);
    } catch (error) {
      // A service without writer leases refuses the fields (nothing was opened): such a
      // service would answer a claim past its tail `invalid`, so this store writes per event.
      if (!(error instanceof ValidationFailed) || options.pipeline === undefined) throw error;
      this.book.logger.warn(
        `mcp-eventlog: the service does not know pipeline windows (${error.detail}); ` +
          "storing every message before it is sent (durability per_event)",
      );
      this.durability = "per_event";
      return this.client.openGeneration(name, {
        ...options,
        pipeline: undefined,
        leaseSeconds: undefined,
      });
    }
  }

  /** The id of a message that goes out unstored; spoils its stream (see the store). */
  private unstoredId(
    sdkStream: StreamId,
    state: StreamState,
    detail: string,
    pause: boolean,
  ): EventId {
    state.broken = true;
    if (state.generation !== undefined) this.book.spoil(state.generation, sdkStream);
    if (pause) this.pausedUntil = Date.now() + this.pauseAfterFailureMs;
    this.book.stats.storeFailures += 1;
    if (detail) {
      this.book.logger.warn(
        `mcp-eventlog: a message of SDK stream ${sdkStream} went out unstored (${detail}); ` +
          "a resume from before it will be refused",
      );
    }
    const id = UNSTORED_PREFIX + randomKey();
    this.book.unstored.set(id, sdkStream);
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
