/**
 * What one `EventLogEventStore` knows of its MCP session: its SDK streams, the generations it
 * opened for them, the ids it handed out unstored and the transport it serves. Its writer
 * (`store-writer.ts`) and its replay (`store-replay.ts`) read and mark the same book.
 */

import { BoundedMap } from "./bounded.js";
import { isRecord } from "./errors.js";
import type { GenerationPipeline } from "./pipeline.js";
import type { StoreLogger, StoreStats } from "./reporting.js";
import type { McpMessage, RequestId, StreamId } from "./sdk.js";
import { StreamNames } from "./names.js";
import type { TransportView } from "./transport.js";

/** Event ids of messages that went out without being stored start with this. */
export const UNSTORED_PREFIX = "unstored:";

const EVENT_ID = /^([A-Za-z0-9_-]+):(\d+)$/;

/** This session's writer state for one SDK stream. */
export class StreamState {
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
export interface Owner {
  readonly sdkStream: StreamId;
  broken: boolean;
}

/** One session's streams, the generations opened for them, and what was handed out unstored. */
export class SessionBook {
  /** This session's random key in the service's stream names. */
  readonly scope = randomKey();
  readonly names = new StreamNames();
  readonly streams: BoundedMap<StreamId, StreamState>;
  readonly owners: BoundedMap<string, Owner>;
  readonly unstored: BoundedMap<string, StreamId>;
  /** The session's transport, once the store is attached to it. */
  transport: TransportView | undefined;
  /** Answers to `initialize` seen: a second one means a second session on this store. */
  initializations = 0;

  constructor(
    maxStreams: number,
    readonly stats: StoreStats,
    readonly logger: StoreLogger,
  ) {
    this.streams = new BoundedMap(maxStreams);
    this.owners = new BoundedMap(maxStreams);
    this.unstored = new BoundedMap(maxStreams);
  }

  state(sdkStream: StreamId): StreamState {
    let state = this.streams.get(sdkStream);
    if (state === undefined) {
      state = new StreamState();
      this.streams.set(sdkStream, state);
    }
    return state;
  }

  /** Mark `generation` spoiled: a resume from any of its ids is refused. Set again (not only
   *  flagged) so the mark survives even if the entry was forgotten. */
  spoil(generation: string, sdkStream: StreamId): void {
    this.owners.set(generation, { sdkStream, broken: true });
  }

  /** The ids of the requests whose answers travel on `sdkStream`. */
  requestsOf(sdkStream: StreamId): RequestId[] {
    const ids = new Set<RequestId>(this.streams.peek(sdkStream)?.answered ?? []);
    for (const id of this.transport?.requestsOn(sdkStream) ?? []) ids.add(id);
    return [...ids];
  }

  /** Remember what a message tells: the request it answers; a second session's start. */
  learn(state: StreamState, message: McpMessage): void {
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
}

/** The generation token of an event id, or undefined when it is not `<token>:<seq>`. */
export function tokenOf(eventId: string): string | undefined {
  return eventId.length <= 300 ? EVENT_ID.exec(eventId)?.[1] : undefined;
}

export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** 128 random bits, URL-safe, without `.` or `:`. */
export function randomKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}
