/**
 * The append channel (`GET /v1/append`, a WebSocket): many appends over one connection.
 *
 * One `AppendChannel` per process and service (`AppendChannel.shared`) carries the appends of
 * every stream of every session: each append is one text frame with an id, the service
 * answers each frame once, in the order the frames were sent, and the answers are matched to
 * the frames in that order (an answer whose id is not the next frame's is a broken channel).
 *
 * - At most `maxInFlight` frames are unanswered at once; the rest wait their turn.
 * - A dropped channel is reopened (backoff as `RetryPolicy`) while frames wait, and every
 *   unanswered frame that carries `firstSeq` is sent again, in its order: the service answers
 *   a repeat of a stored batch 200 `duplicate`, so a retry is stored once. A frame without
 *   `firstSeq` is never repeated (it may have been stored): it fails `ServiceUnreachable`.
 * - The answers are the REST append's, typed the same: a refusal frame is the
 *   `ServiceRefusal` of its `code` (`errors.ts`), a 5xx is retried as the REST path retries it.
 * - The REST path's hardening holds: one deadline per attempt (`timeoutMs`, for the
 *   handshake and for each frame's answer: a silent channel is cut and reopened), answers
 *   capped at `maxResponseBytes`, redirects of the upgrade never followed. A frame that is
 *   not an answer (not JSON, not an object, the wrong id, binary, over the cap) is an
 *   `InvalidResponse` for the frame it stood for, never retried, and the channel is closed,
 *   since it can no longer be trusted to keep the order.
 * - When the channel cannot be opened at all (the upgrade refused: an old service, a proxy
 *   that does not pass WebSockets; `ws` missing; the handshake failing), every waiting frame
 *   fails `ChannelUnavailable` and the channel is not tried again for `retryAfterMs`: the
 *   caller sends over REST instead (the store does, `store.ts`).
 *
 * Node 20 has no global `WebSocket` (only behind `--experimental-websocket`), and the WHATWG
 * one cannot send an `Authorization` header, cap a frame or refuse a redirect: the channel
 * uses the `ws` package, loaded when the first frame is sent.
 */

import { MAX_LEASE_FRAME_GENERATIONS, parseLeases } from "./channel-answers.js";
import { ChannelLine, type LineCounts } from "./channel-line.js";
import {
  type ConnectionOptions,
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_RETRY,
  DEFAULT_URL,
  type RetryPolicy,
} from "./connection.js";
import type { EventLogError } from "./errors.js";
import {
  type AppendResult,
  type LeaseRenewal,
  type NewEvent,
  parseAppendResult,
  parseLeaseRenewal,
} from "./models.js";

export { ChannelUnavailable } from "./channel-answers.js";

/** How a channel reaches the service: the connection's options, and its own. */
export interface ChannelOptions extends Omit<ConnectionOptions, "fetch" | "key"> {
  readonly key?: string | undefined;
  /** Unanswered frames at most; default 64. */
  readonly maxInFlight?: number | undefined;
  /** After the channel could not be opened, how long appends go over REST; default 10 000. */
  readonly retryAfterMs?: number;
}

/** One append, as `EventLogClient.append` takes it. */
export interface ChannelAppend {
  readonly generation: string;
  readonly events: readonly NewEvent[];
  readonly firstSeq?: number | undefined;
  readonly terminal?: boolean | undefined;
  readonly signal?: AbortSignal | undefined;
}

function environment(name: string): string | undefined {
  const value = process.env[name];
  return value === "" ? undefined : value;
}

const SHARED = new Map<string, AppendChannel>();

/** Many appends over one WebSocket (see the module). */
export class AppendChannel {
  readonly url: string;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  readonly maxInFlight: number;
  readonly retry: RetryPolicy;
  readonly retryAfterMs: number;
  /** Counts: frames answered, frames sent again after a drop, channels opened, channels that
   *  could not be opened, channels closed for sending what is not an answer, and the most
   *  frames ever unanswered at once. */
  readonly counts: LineCounts = {
    answered: 0,
    resent: 0,
    opened: 0,
    openFailures: 0,
    broken: 0,
    peakInFlight: 0,
  };
  private readonly headers: Record<string, string>;
  private readonly line: ChannelLine;

  constructor(options: ChannelOptions = {}) {
    const base = (options.baseUrl ?? environment("EVENTLOG_URL") ?? DEFAULT_URL).replace(
      /\/+$/,
      "",
    );
    this.url = `${base.replace(/^http/, "ws")}/v1/append`;
    const key = options.key ?? environment("EVENTLOG_KEY");
    this.headers = key ? { authorization: `Bearer ${key}` } : {};
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.maxInFlight = Math.max(1, options.maxInFlight ?? 64);
    this.retry = options.retry ?? DEFAULT_RETRY;
    this.retryAfterMs = options.retryAfterMs ?? 10_000;
    const settings = {
      url: this.url,
      headers: this.headers,
      timeoutMs: this.timeoutMs,
      maxResponseBytes: this.maxResponseBytes,
      maxInFlight: this.maxInFlight,
      retry: this.retry,
      retryAfterMs: this.retryAfterMs,
    };
    this.line = new ChannelLine(settings, this.counts);
  }

  /**
   * The process's one channel to the service these options name (base URL, key, and every
   * limit: stores built alike share it). It is never closed by its users: idle, it holds the
   * process open no longer than its socket lives (the socket is unreferenced while idle).
   */
  static shared(options: ChannelOptions = {}): AppendChannel {
    const channel = new AppendChannel(options);
    const key = JSON.stringify([
      channel.url,
      channel.headers,
      channel.timeoutMs,
      channel.maxResponseBytes,
      channel.maxInFlight,
      channel.retry,
      channel.retryAfterMs,
    ]);
    const known = SHARED.get(key);
    if (known !== undefined && !known.line.closedForGood) return known;
    SHARED.set(key, channel);
    return channel;
  }

  /** Close every shared channel (tests; a process about to exit need not). */
  static closeShared(): void {
    for (const channel of SHARED.values()) channel.close();
    SHARED.clear();
  }

  /** Frames waiting or unanswered. */
  get pending(): number {
    return this.line.pending;
  }

  /** Whether appends go over REST for now, because the channel could not be opened. */
  get fallingBack(): boolean {
    return this.line.fallingBack;
  }

  /**
   * Append a batch, as `EventLogClient.append` does, over the channel. Throws the REST
   * append's typed errors; `ChannelUnavailable` when the channel cannot be opened.
   */
  append(request: ChannelAppend): Promise<AppendResult> {
    const body = {
      generation: request.generation,
      events: request.events.map((e) => ({ data: e.data, event: e.event ?? null })),
      first_seq: request.firstSeq ?? null,
      terminal: request.terminal ?? false,
    };
    const retry = request.firstSeq !== undefined;
    return this.line.enqueue(body, retry, request.signal, parseAppendResult);
  }

  /**
   * Renew `generation`'s writer lease with a lease frame (`{"id", "generation", "lease":
   * true}`); throws the REST renewal's typed errors (`abandoned` once it ran out). A renewal
   * is repeated after a drop like an append with `firstSeq`: renewing twice is renewing.
   */
  renewLease(generation: string, signal?: AbortSignal): Promise<LeaseRenewal> {
    return this.line.enqueue({ generation, lease: true }, true, signal, parseLeaseRenewal);
  }

  /**
   * Renew the leases of `generations` together: one lease frame per 1,000 of them
   * (`{"id", "lease": true, "generations": [...]}`), renewed by the service in one write.
   * Each generation's outcome is its renewal or its refusal (`abandoned`, `superseded`, …);
   * a frame that fails as a whole (no answer, a 5xx) throws.
   */
  async renewLeases(
    generations: readonly string[],
    signal?: AbortSignal,
  ): Promise<Map<string, LeaseRenewal | EventLogError>> {
    const outcomes = new Map<string, LeaseRenewal | EventLogError>();
    const frames: Promise<void>[] = [];
    for (let at = 0; at < generations.length; at += MAX_LEASE_FRAME_GENERATIONS) {
      const chunk = generations.slice(at, at + MAX_LEASE_FRAME_GENERATIONS);
      const body = { lease: true, generations: chunk };
      const frame = this.line.enqueue(body, true, signal, parseLeases);
      frames.push(
        frame.then((answers) => {
          for (const [generation, outcome] of answers) outcomes.set(generation, outcome);
        }),
      );
    }
    await Promise.all(frames);
    return outcomes;
  }

  /** Close the channel; every waiting frame fails `ChannelUnavailable`. */
  close(): void {
    this.line.close();
  }
}
