/**
 * What the store reads of, and does to, the SDK transport it serves (`store.attach(...)`).
 *
 * The `EventStore` seam hands the store no request ids and no way to end a connection, yet a
 * refusal must carry the id of the request it fails, and a resumed stream with nothing more
 * to come must end. Both SDK generations' `WebStandardStreamableHTTPServerTransport` (and the
 * Node wrappers around it, which hold it as `_webStandardTransport`) keep what is needed in
 * the same three fields; this module is the one place that reads them, so an SDK that
 * renames one breaks here, loudly (`attach` logs what it could not find), not everywhere.
 */

import type { McpEventStore, RequestId, StreamId } from "./sdk.js";

/** The SDK's name of the standalone (GET) stream of a session. */
export const GET_STREAM = "_GET_stream";

interface RegisteredStream {
  cleanup?: () => void;
}

function field(target: object, name: string): unknown {
  return (target as Record<string, unknown>)[name];
}

/** The session's transport, as the store sees it. */
export class TransportView {
  private readonly requestStreams: ReadonlyMap<unknown, unknown> | undefined;
  private readonly streams: ReadonlyMap<unknown, unknown> | undefined;

  private constructor(readonly inner: object) {
    const requests = field(inner, "_requestToStreamMapping");
    const streams = field(inner, "_streamMapping");
    this.requestStreams = requests instanceof Map ? requests : undefined;
    this.streams = streams instanceof Map ? streams : undefined;
  }

  /**
   * The view of `transport` (or of the web-standard transport a Node wrapper holds). Throws
   * when it is not an SDK transport, or when it was built with another event store than
   * `store`.
   */
  static of(transport: object, store: McpEventStore): TransportView {
    const inner = field(transport, "_webStandardTransport") ?? transport;
    if (typeof inner !== "object" || inner === null) throw new TypeError("not an SDK transport");
    const eventStore = field(inner, "_eventStore");
    if (eventStore !== undefined && eventStore !== store) {
      throw new Error("the transport was built with another eventStore than this one");
    }
    return new TransportView(inner);
  }

  /** What this SDK's transport lacks of what the store reads (empty: nothing). */
  missing(): string[] {
    const lacks: string[] = [];
    if (this.requestStreams === undefined) lacks.push("its request-to-stream map");
    if (this.streams === undefined) lacks.push("its stream map");
    return lacks;
  }

  /** Whether the transport tells which requests each stream carries. */
  get knowsRequests(): boolean {
    return this.requestStreams !== undefined;
  }

  /** The ids of the requests still running whose answers travel on `sdkStream`. */
  requestsOn(sdkStream: StreamId): RequestId[] {
    const ids: RequestId[] = [];
    for (const [id, stream] of this.requestStreams ?? []) {
      if (stream === sdkStream && (typeof id === "string" || typeof id === "number")) ids.push(id);
    }
    return ids;
  }

  /** Hand `error` to the transport's `onerror`, as the transport does with its own. */
  report(error: Error): void {
    const onerror = field(this.inner, "onerror");
    if (typeof onerror === "function") (onerror as (error: Error) => void).call(this.inner, error);
  }

  /**
   * End the connection a replay is registered under once nothing more can come on it: the
   * stream is not the standalone one and no running request answers on it (a finished
   * request's stream, or a refusal's). SDK 2.x does this itself; 1.x keeps such a
   * connection open with keep-alives for ever. Runs after the transport has registered the
   * connection (it does so when `replayEventsAfter` returns).
   */
  endIfFinished(streamId: StreamId): void {
    if (!this.knowsRequests || streamId === GET_STREAM) return;
    setTimeout(() => {
      if (this.requestsOn(streamId).length > 0) return;
      const registered = this.streams?.get(streamId) as RegisteredStream | undefined;
      registered?.cleanup?.();
    }, 0);
  }
}
