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

import type { ClientRequest, IncomingMessage } from "node:http";

import type { RawData, WebSocket as WsSocket } from "ws";

import { ERROR_BODY_BYTES, isJsonMediaType } from "./body.js";
import {
  type ConnectionOptions,
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_RETRY,
  DEFAULT_URL,
  type RetryPolicy,
  retryDelayMs,
} from "./connection.js";
import {
  DeadlineExceeded,
  errorFor,
  errorFromBody,
  EventLogError,
  HttpError,
  InvalidResponse,
  isRecord,
  MalformedResponse,
  Redirected,
  ResponseTooLarge,
  ServiceUnreachable,
} from "./errors.js";
import {
  type AppendResult,
  type LeaseRenewal,
  type NewEvent,
  parseAppendResult,
  parseLeaseRenewal,
} from "./models.js";

/** The channel could not be opened (see the module): send over REST instead. Status 0. */
export class ChannelUnavailable extends ServiceUnreachable {
  static override readonly code = "channel_unavailable";
}

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

interface Frame {
  readonly body: Record<string, unknown>;
  readonly retry: boolean;
  /** Reads a success answer (an append's, a lease renewal's). */
  readonly parse: (body: unknown) => unknown;
  readonly resolve: (result: unknown) => void;
  readonly reject: (error: unknown) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
  /** Times sent; each send is one attempt. */
  attempts: number;
  /** The wire id of its latest send. */
  wireId: number;
  /** Answered, failed or abandoned by its caller: its answer (if sent) is still consumed. */
  done: boolean;
  timer: ReturnType<typeof setTimeout> | undefined;
}

interface Socket {
  readonly ws: WsSocket;
  /** Frames sent on this socket and not answered, in the order sent. */
  readonly sent: Frame[];
  open: boolean;
  closed: boolean;
}

type WsModule = typeof import("ws");
let wsModule: Promise<WsModule> | undefined;

function loadWs(): Promise<WsModule> {
  wsModule ??= import("ws");
  return wsModule;
}

function environment(name: string): string | undefined {
  const value = process.env[name];
  return value === "" ? undefined : value;
}

const SHARED = new Map<string, AppendChannel>();

/** The close code of a channel the service turns away (`too_many_channels`). */
const TOO_MANY_CHANNELS = 1013;

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
  readonly counts = {
    answered: 0,
    resent: 0,
    opened: 0,
    openFailures: 0,
    broken: 0,
    peakInFlight: 0,
  };
  private readonly headers: Record<string, string>;
  private readonly queue: Frame[] = [];
  private socket: Socket | undefined;
  private connecting = false;
  private reconnects = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private unavailable: { until: number; why: ChannelUnavailable } | undefined;
  private nextId = 1;
  private closedForGood = false;

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
    if (known !== undefined && !known.closedForGood) return known;
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
    return this.queue.length + (this.socket?.sent.filter((f) => !f.done).length ?? 0);
  }

  /** Whether appends go over REST for now, because the channel could not be opened. */
  get fallingBack(): boolean {
    return this.unavailable !== undefined && Date.now() < this.unavailable.until;
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
    return this.enqueue(body, request.firstSeq !== undefined, request.signal, parseAppendResult);
  }

  /**
   * Renew `generation`'s writer lease with a lease frame (`{"id", "generation", "lease":
   * true}`); throws the REST renewal's typed errors (`abandoned` once it ran out). A renewal
   * is repeated after a drop like an append with `firstSeq`: renewing twice is renewing.
   */
  renewLease(generation: string, signal?: AbortSignal): Promise<LeaseRenewal> {
    return this.enqueue({ generation, lease: true }, true, signal, parseLeaseRenewal);
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
      const frame = this.enqueue({ lease: true, generations: chunk }, true, signal, parseLeases);
      frames.push(
        frame.then((answers) => {
          for (const [generation, outcome] of answers) outcomes.set(generation, outcome);
        }),
      );
    }
    await Promise.all(frames);
    return outcomes;
  }

  private enqueue<T>(
    body: Record<string, unknown>,
    retry: boolean,
    signal: AbortSignal | undefined,
    parse: (body: unknown) => T,
  ): Promise<T> {
    if (this.closedForGood) {
      return Promise.reject(new ChannelUnavailable(0, ChannelUnavailable.code, "closed"));
    }
    if (this.unavailable !== undefined) {
      if (Date.now() < this.unavailable.until) return Promise.reject(this.unavailable.why);
      this.unavailable = undefined;
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<T>((resolve, reject) => {
      const frame: Frame = {
        body,
        retry,
        parse,
        resolve: resolve as (result: unknown) => void,
        reject,
        signal,
        onAbort: () => this.settle(frame, signal?.reason, true),
        attempts: 0,
        wireId: 0,
        done: false,
        timer: undefined,
      };
      signal?.addEventListener("abort", frame.onAbort, { once: true });
      this.queue.push(frame);
      this.pump();
    });
  }

  /** Close the channel; every waiting frame fails `ChannelUnavailable`. */
  close(): void {
    this.closedForGood = true;
    clearTimeout(this.reconnectTimer);
    const why = new ChannelUnavailable(0, ChannelUnavailable.code, "the channel was closed");
    for (const frame of this.queue.splice(0)) this.settle(frame, why, false);
    const socket = this.socket;
    this.socket = undefined;
    if (socket !== undefined) {
      socket.closed = true;
      for (const frame of socket.sent.splice(0)) this.settle(frame, why, false);
      socket.ws.close(1000, "closed by the client");
    }
  }

  /** Send what may be sent; open the channel when frames wait and none is open. */
  private pump(): void {
    this.queue.splice(0, this.queue.length, ...this.queue.filter((f) => !f.done));
    if (this.queue.length === 0) {
      this.idle();
      return;
    }
    const socket = this.socket;
    if (socket === undefined || !socket.open) {
      if (socket === undefined) this.connect();
      return;
    }
    holdOpen(socket.ws, true);
    while (this.queue.length > 0 && socket.sent.length < this.maxInFlight) {
      const frame = this.queue.shift() as Frame;
      if (frame.done) continue;
      frame.attempts += 1;
      frame.wireId = this.nextId++;
      socket.sent.push(frame);
      this.counts.peakInFlight = Math.max(this.counts.peakInFlight, socket.sent.length);
      frame.timer = setTimeout(() => this.timedOut(socket, frame), this.timeoutMs);
      socket.ws.send(JSON.stringify({ id: frame.wireId, ...frame.body }));
    }
  }

  /** Nothing to send or to wait for: the socket may not hold the process open. */
  private idle(): void {
    const socket = this.socket;
    if (socket?.open && socket.sent.length === 0) holdOpen(socket.ws, false);
  }

  private connect(): void {
    if (this.connecting || this.reconnectTimer !== undefined || this.closedForGood) return;
    this.connecting = true;
    void this.open().finally(() => {
      this.connecting = false;
    });
  }

  private async open(): Promise<void> {
    let WebSocketClass: WsModule["WebSocket"];
    try {
      WebSocketClass = (await loadWs()).WebSocket;
    } catch (error) {
      this.counts.openFailures += 1;
      this.cannotOpen(`the ws package is not installed (${describe(error)})`, error);
      return;
    }
    const ws = new WebSocketClass(this.url, {
      headers: this.headers,
      handshakeTimeout: this.timeoutMs,
      maxPayload: this.maxResponseBytes,
      followRedirects: false,
      perMessageDeflate: false,
    });
    const socket: Socket = { ws, sent: [], open: false, closed: false };
    this.socket = socket;
    ws.on("unexpected-response", (request: ClientRequest, response: IncomingMessage) => {
      void refusalOf(response).then((refusal) => {
        this.dropped(socket, undefined, refusal);
        request.destroy();
      });
    });
    ws.on("open", () => {
      socket.open = true;
      this.counts.opened += 1;
      this.reconnects = 0;
      this.pump();
    });
    ws.on("message", (data: RawData, binary: boolean) => this.answered(socket, data, binary));
    ws.on("error", (error: Error) => this.dropped(socket, error));
    ws.on("close", (code: number, reason: Buffer) => {
      const why = `the channel closed (${code} ${reason.toString()})`.trim();
      if (code === TOO_MANY_CHANNELS) this.turnedAway(socket, why);
      else this.dropped(socket, new Error(why));
    });
  }

  /** An answer arrived: it is the oldest unanswered frame's, or the channel is broken. */
  private answered(socket: Socket, data: RawData, binary: boolean): void {
    if (socket.closed) return;
    const frame = socket.sent[0];
    const text = binary ? undefined : rawText(data);
    let body: unknown;
    try {
      body = text === undefined ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    const id = isRecord(body) ? body["id"] : undefined;
    if (frame === undefined || !isRecord(body) || id !== frame.wireId) {
      const what = binary
        ? "a binary frame"
        : frame === undefined
          ? "an answer to no frame"
          : !isRecord(body)
            ? `not a JSON object: ${(text ?? "").slice(0, 200)}`
            : `the answer to frame ${JSON.stringify(id)}, not ${frame.wireId}`;
      this.broken(
        socket,
        new MalformedResponse(0, MalformedResponse.code, `the channel sent ${what}`),
      );
      return;
    }
    socket.sent.shift();
    clearTimeout(frame.timer);
    this.counts.answered += 1;
    const status = body["status"];
    if (status === 200 || status === 201) {
      let result: unknown;
      try {
        result = frame.parse(body);
      } catch (error) {
        this.settle(frame, error, false);
        this.pump();
        return;
      }
      this.settle(frame, result, false, true);
    } else {
      const error = refusalFrame(status, body);
      if (
        frame.retry &&
        error.status >= 500 &&
        frame.attempts < this.retry.attempts &&
        !frame.done
      ) {
        // Retried as the REST path retries a 5xx: after the backoff, in the queue again.
        const delay = retryDelayMs(this.retry, frame.attempts - 1);
        setTimeout(() => {
          if (frame.done) return;
          this.queue.push(frame);
          this.pump();
        }, delay);
      } else {
        this.settle(frame, error, false);
      }
    }
    this.pump();
  }

  /** A frame's answer is not coming within the attempt's deadline: the channel is stuck. */
  private timedOut(socket: Socket, frame: Frame): void {
    if (socket.closed || !socket.sent.includes(frame)) return;
    const error = new DeadlineExceeded(
      0,
      DeadlineExceeded.code,
      `no answer on the channel within ${this.timeoutMs} ms`,
    );
    this.drop(socket, error, 4000, "no answer in time");
  }

  /** The channel said something that is not an answer: its oldest frame fails, the rest are
   *  sent again on a new channel. */
  private broken(socket: Socket, error: InvalidResponse): void {
    this.counts.broken += 1;
    const frame = socket.sent.shift();
    if (frame !== undefined) {
      clearTimeout(frame.timer);
      this.settle(frame, error, false);
    }
    this.drop(socket, error, 1002, "not an answer");
  }

  private drop(socket: Socket, error: Error, code: number, reason: string): void {
    try {
      socket.ws.close(code, reason);
    } catch {
      // already closing
    }
    socket.ws.terminate();
    this.dropped(socket, error);
  }

  /**
   * The socket is gone (closed, failed, or refused at the upgrade). Its unanswered frames go
   * back to the front of the queue when they may be repeated, and the channel is reopened
   * while frames wait; if it never opened, every waiting frame fails `ChannelUnavailable`.
   */
  private dropped(socket: Socket, error: Error | undefined, refusal?: EventLogError): void {
    if (socket.closed) return;
    socket.closed = true;
    if (this.socket === socket) this.socket = undefined;
    if (!socket.open) {
      this.counts.openFailures += 1;
      const why = refusal ?? error ?? new Error("the upgrade failed");
      // No answer at all (refused connection, reset, handshake timeout) is tried again as a
      // request is; an answer that is not the upgrade (a refusal, a redirect) is final.
      const waiting = this.queue.some((f) => !f.done);
      if (refusal === undefined && waiting && this.reconnects + 1 < this.retry.attempts) {
        this.scheduleReconnect();
        return;
      }
      this.cannotOpen(describe(why), why);
      return;
    }
    const mapped = wsProtocolError(error);
    const back: Frame[] = [];
    for (const [index, frame] of socket.sent.splice(0).entries()) {
      clearTimeout(frame.timer);
      if (frame.done) continue;
      if (index === 0 && mapped !== undefined) {
        this.settle(frame, mapped, false);
      } else if (!frame.retry) {
        const detail = `the channel dropped before answering: ${describe(error)}`;
        this.settle(frame, new ServiceUnreachable(0, ServiceUnreachable.code, detail), false);
      } else if (frame.attempts >= Math.max(1, this.retry.attempts)) {
        this.settle(frame, unreachable(error), false);
      } else {
        back.push(frame);
      }
    }
    this.counts.resent += back.length;
    this.queue.unshift(...back);
    if (this.queue.some((f) => !f.done)) this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closedForGood || this.reconnectTimer !== undefined) return;
    const delay = retryDelayMs(this.retry, Math.min(this.reconnects, 10));
    this.reconnects += 1;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.pump();
    }, delay);
  }

  /**
   * The service accepted the channel and closed it at once, 1013: the key holds as many
   * channels as it may. It read none of the frames, so each, sent or waiting, may go over
   * REST: like a channel that could not be opened.
   */
  private turnedAway(socket: Socket, why: string): void {
    if (socket.closed) return;
    socket.closed = true;
    if (this.socket === socket) this.socket = undefined;
    this.counts.openFailures += 1;
    const sent = socket.sent.splice(0).filter((f) => !f.done);
    for (const frame of sent) clearTimeout(frame.timer);
    this.queue.unshift(...sent);
    this.cannotOpen(`${why}: the key holds as many channels as the service allows`, undefined);
  }

  /** The channel could not be opened: fail every waiting frame, go REST for a while. */
  private cannotOpen(detail: string, cause: unknown): void {
    const why = new ChannelUnavailable(
      0,
      ChannelUnavailable.code,
      `the append channel ${this.url} could not be opened: ${detail}`,
      { cause },
    );
    this.unavailable = { until: Date.now() + this.retryAfterMs, why };
    for (const frame of this.queue.splice(0)) this.settle(frame, why, false);
  }

  private settle(frame: Frame, outcome: unknown, aborted: boolean, ok = false): void {
    if (frame.done) return;
    frame.done = true;
    clearTimeout(frame.timer);
    frame.signal?.removeEventListener("abort", frame.onAbort);
    if (ok) frame.resolve(outcome);
    else frame.reject(outcome);
    if (aborted) {
      // An abandoned frame that was never sent leaves the queue; a sent one keeps its place
      // among the unanswered, so the answers still line up.
      const at = this.queue.indexOf(frame);
      if (at >= 0) this.queue.splice(at, 1);
    }
  }
}

/** The most generations one lease frame renews (the service's limit). */
const MAX_LEASE_FRAME_GENERATIONS = 1_000;

/** The answer to a many-generation lease frame: each generation's renewal or refusal. */
function parseLeases(body: unknown): Map<string, LeaseRenewal | EventLogError> {
  const leases = isRecord(body) ? body["leases"] : undefined;
  if (!Array.isArray(leases)) {
    throw new MalformedResponse(200, MalformedResponse.code, "the lease answer has no leases");
  }
  const outcomes = new Map<string, LeaseRenewal | EventLogError>();
  for (const item of leases) {
    const generation = isRecord(item) ? item["generation"] : undefined;
    if (!isRecord(item) || typeof generation !== "string") {
      throw new MalformedResponse(
        200,
        MalformedResponse.code,
        "a lease answer names no generation",
      );
    }
    const status = item["status"];
    outcomes.set(generation, status === 200 ? parseLeaseRenewal(item) : refusalFrame(status, item));
  }
  return outcomes;
}

/** The typed error of a refusal frame: the REST append's for the same code and status. */
function refusalFrame(status: unknown, body: Record<string, unknown>): EventLogError {
  const code = body["code"];
  const detail = typeof body["detail"] === "string" ? body["detail"] : "";
  if (typeof status !== "number" || !Number.isInteger(status)) {
    return new MalformedResponse(0, MalformedResponse.code, "the channel's answer has no status");
  }
  if (typeof code === "string") return errorFor(status, code, detail);
  return new HttpError(status, HttpError.code, detail || `status ${status}`);
}

/** Why the upgrade was answered with something else than 101: read up to the error cap. */
async function refusalOf(response: IncomingMessage): Promise<EventLogError> {
  const status = response.statusCode ?? 0;
  if (status >= 300 && status < 400) {
    response.resume();
    const location = String(response.headers.location ?? "nowhere").slice(0, 200);
    return new Redirected(
      status,
      Redirected.code,
      `the upgrade was answered with a redirect (${status} to ${location}); never followed`,
    );
  }
  const chunks: Buffer[] = [];
  let bytes = 0;
  const type = response.headers["content-type"] ?? null;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 2_000);
    response.on("data", (chunk: Buffer) => {
      if (bytes < ERROR_BODY_BYTES) chunks.push(chunk);
      bytes += chunk.length;
      if (bytes >= ERROR_BODY_BYTES) {
        clearTimeout(timer);
        resolve();
      }
    });
    response.on("end", () => {
      clearTimeout(timer);
      resolve();
    });
    response.on("error", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  const text = Buffer.concat(chunks).toString("utf8").slice(0, ERROR_BODY_BYTES);
  return errorFromBody(
    status,
    response.statusMessage ?? "",
    text,
    isJsonMediaType(type) ? type : null,
  );
}

/** A frame `ws` refused to read (over the cap, not UTF-8, a protocol error). */
function wsProtocolError(error: Error | undefined): InvalidResponse | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code !== "string" || !code.startsWith("WS_ERR_")) return undefined;
  const detail = `the channel sent a frame that cannot be read: ${error?.message ?? code}`;
  if (code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") {
    return new ResponseTooLarge(0, ResponseTooLarge.code, detail);
  }
  return new MalformedResponse(0, MalformedResponse.code, detail);
}

function unreachable(error: Error | undefined): ServiceUnreachable {
  const detail = `the channel dropped before answering: ${describe(error)}`;
  return error instanceof DeadlineExceeded
    ? error
    : new ServiceUnreachable(0, ServiceUnreachable.code, detail, { cause: error });
}

/** Let the socket hold the process open (frames wait), or not (idle). `ws` keeps its
 *  `net.Socket` as `_socket`; a `ws` without it only means an idle channel holds the
 *  process open until the service closes it. */
function holdOpen(ws: WsSocket, hold: boolean): void {
  const raw = (ws as unknown as { _socket?: { ref?: () => void; unref?: () => void } })._socket;
  if (hold) raw?.ref?.();
  else raw?.unref?.();
}

function rawText(data: RawData): string | undefined {
  const buffer = Array.isArray(data)
    ? Buffer.concat(data)
    : data instanceof ArrayBuffer
      ? Buffer.from(data)
      : data;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(buffer);
  } catch {
    return undefined;
  }
}

function describe(error: unknown): string {
  if (error === undefined) return "no reason given";
  return error instanceof Error ? error.message : String(error);
}
