/**
 * The append channel's one line to the service: the frames waiting and unanswered, the
 * WebSocket they travel on, and what happens when it drops, stalls, breaks the order or cannot
 * be opened. `channel.ts` has the rules; this module keeps them.
 */

import type { ClientRequest, IncomingMessage } from "node:http";

import type { RawData, WebSocket as WsSocket } from "ws";

import {
  ChannelUnavailable,
  describe,
  readAnswer,
  refusalFrame,
  unreachable,
  upgradeRefusal,
  wsProtocolError,
} from "./channel-answers.js";
import { type RetryPolicy, retryDelayMs } from "./connection.js";
import {
  DeadlineExceeded,
  type EventLogError,
  type InvalidResponse,
  ServiceUnreachable,
} from "./errors.js";

/** How the line reaches the service, and its limits (resolved from `ChannelOptions`). */
export interface LineSettings {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  readonly maxInFlight: number;
  readonly retry: RetryPolicy;
  readonly retryAfterMs: number;
}

/** What the line counts (the channel's `counts`). */
export interface LineCounts {
  answered: number;
  resent: number;
  opened: number;
  openFailures: number;
  broken: number;
  peakInFlight: number;
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

/** The close code of a channel the service turns away (`too_many_channels`). */
const TOO_MANY_CHANNELS = 1013;

/** The frames of one channel and the socket they travel on (see the module). */
export class ChannelLine {
  private readonly queue: Frame[] = [];
  private socket: Socket | undefined;
  private connecting = false;
  private reconnects = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private unavailable: { until: number; why: ChannelUnavailable } | undefined;
  private nextId = 1;
  /** Closed by its owner: nothing is sent again. */
  closedForGood = false;

  constructor(
    private readonly settings: LineSettings,
    private readonly counts: LineCounts,
  ) {}

  /** Frames waiting or unanswered. */
  get pending(): number {
    return this.queue.length + (this.socket?.sent.filter((f) => !f.done).length ?? 0);
  }

  /** Whether appends go over REST for now, because the channel could not be opened. */
  get fallingBack(): boolean {
    return this.unavailable !== undefined && Date.now() < this.unavailable.until;
  }

  /** Send `body` as a frame; its answer read by `parse`. `retry`: it may be sent again after
   *  a drop (the service stores a repeat once). */
  enqueue<T>(
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

  /** Close the line; every waiting frame fails `ChannelUnavailable`. */
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

  /** Send what may be sent; open the channel when frames wait and none is open. With nothing
   *  to send or to wait for, the socket may not hold the process open. */
  private pump(): void {
    this.queue.splice(0, this.queue.length, ...this.queue.filter((f) => !f.done));
    const socket = this.socket;
    if (this.queue.length === 0) {
      if (socket?.open && socket.sent.length === 0) holdOpen(socket.ws, false);
      return;
    }
    if (socket === undefined || !socket.open) {
      const opening = this.connecting || this.reconnectTimer !== undefined;
      if (socket === undefined && !opening && !this.closedForGood) {
        this.connecting = true;
        void this.open().finally(() => {
          this.connecting = false;
        });
      }
      return;
    }
    holdOpen(socket.ws, true);
    while (this.queue.length > 0 && socket.sent.length < this.settings.maxInFlight) {
      const frame = this.queue.shift() as Frame;
      if (frame.done) continue;
      frame.attempts += 1;
      frame.wireId = this.nextId++;
      socket.sent.push(frame);
      this.counts.peakInFlight = Math.max(this.counts.peakInFlight, socket.sent.length);
      frame.timer = setTimeout(() => this.timedOut(socket, frame), this.settings.timeoutMs);
      socket.ws.send(JSON.stringify({ id: frame.wireId, ...frame.body }));
    }
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
    const { url, headers, timeoutMs, maxResponseBytes } = this.settings;
    const ws = new WebSocketClass(url, {
      headers,
      handshakeTimeout: timeoutMs,
      maxPayload: maxResponseBytes,
      followRedirects: false,
      perMessageDeflate: false,
    });
    const socket: Socket = { ws, sent: [], open: false, closed: false };
    this.socket = socket;
    ws.on("unexpected-response", (request: ClientRequest, response: IncomingMessage) => {
      void upgradeRefusal(response).then((refusal) => {
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
    const answer = readAnswer(data, binary, frame?.wireId);
    if ("broken" in answer || frame === undefined) {
      if ("broken" in answer) this.broken(socket, answer.broken);
      return;
    }
    socket.sent.shift();
    clearTimeout(frame.timer);
    this.counts.answered += 1;
    const body = answer.body;
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
      const retry = this.settings.retry;
      if (frame.retry && error.status >= 500 && frame.attempts < retry.attempts && !frame.done) {
        // Retried as the REST path retries a 5xx: after the backoff, in the queue again.
        const delay = retryDelayMs(retry, frame.attempts - 1);
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
      `no answer on the channel within ${this.settings.timeoutMs} ms`,
    );
    cut(socket.ws, 4000, "no answer in time");
    this.dropped(socket, error);
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
    cut(socket.ws, 1002, "not an answer");
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
    const retry = this.settings.retry;
    if (!socket.open) {
      this.counts.openFailures += 1;
      const why = refusal ?? error ?? new Error("the upgrade failed");
      // No answer at all (refused connection, reset, handshake timeout) is tried again as a
      // request is; an answer that is not the upgrade (a refusal, a redirect) is final.
      const waiting = this.queue.some((f) => !f.done);
      if (refusal === undefined && waiting && this.reconnects + 1 < retry.attempts) {
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
      } else if (frame.attempts >= Math.max(1, retry.attempts)) {
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
    const delay = retryDelayMs(this.settings.retry, Math.min(this.reconnects, 10));
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
      `the append channel ${this.settings.url} could not be opened: ${detail}`,
      { cause },
    );
    this.unavailable = { until: Date.now() + this.settings.retryAfterMs, why };
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

/** End a socket that can no longer be trusted, without waiting for its closing handshake. */
function cut(ws: WsSocket, code: number, reason: string): void {
  try {
    ws.close(code, reason);
  } catch {
    // already closing
  }
  ws.terminate();
}

/** Let the socket hold the process open (frames wait), or not (idle). `ws` keeps its
 *  `net.Socket` as `_socket`; a `ws` without it only means an idle channel holds the
 *  process open until the service closes it. */
function holdOpen(ws: WsSocket, hold: boolean): void {
  const raw = (ws as unknown as { _socket?: { ref?: () => void; unref?: () => void } })._socket;
  if (hold) raw?.ref?.();
  else raw?.unref?.();
}
