/**
 * Following a stream as it is written: `GET /v1/streams/{stream_id}/live`, as typed events.
 *
 * The service sends data events (`id: <token>:<seq>`), `reset` control events (discard what
 * you hold: a newer generation follows, or the next one opened) and an `end` control event
 * after a terminal generation's last event; it ends a connection after
 * `EVENTLOG_LIVE_MAX_SECONDS` and sends a keep-alive every `EVENTLOG_LIVE_HEARTBEAT_SECONDS`
 * (15). One connection is one `follow()`: it ends when the service closes the response, and
 * the caller reconnects with the last id it holds.
 *
 * Nothing the service sends is trusted to be well-formed or bounded: the connection must
 * open within the client's `timeoutMs`, then hear something (a keep-alive at least) every
 * `idleTimeoutMs`; a line or a frame over its limit, bytes that are not UTF-8 or a control
 * event that is not the contract's end the stream with an `InvalidResponse` (`ResponseTooLarge`,
 * `MalformedResponse`).
 */

import type { ServiceConnection } from "./connection.js";
import {
  DeadlineExceeded,
  EventLogError,
  isRecord,
  MalformedResponse,
  ResponseTooLarge,
  ServiceUnreachable,
} from "./errors.js";
import { MalformedStream, readFrames, type SseFrame } from "./sse.js";

/** One thing a live connection delivered. */
export type LiveEvent =
  | {
      readonly kind: "event";
      readonly id: string;
      readonly generation: string;
      readonly seq: number;
      /** The stored SSE type (`message` also for a stored null). */
      readonly event: string;
      readonly data: string;
    }
  | { readonly kind: "reset"; readonly reason: string; readonly generation: string | null }
  | { readonly kind: "end"; readonly generation: string; readonly terminalSeq: number };

/** Options of one live connection. */
export interface FollowOptions {
  /** Where to continue: the id of the last event held (none: the current generation whole). */
  readonly lastEventId?: string | undefined;
  /** Ends the connection (the iteration then throws the signal's reason). */
  readonly signal?: AbortSignal | undefined;
  /** The longest silence before the connection is given up; default 60 000 (four beats). */
  readonly idleTimeoutMs?: number | undefined;
  /** The longest line, and the most data of one frame, in bytes; default 2 MiB each. */
  readonly maxFrameBytes?: number | undefined;
  /** Called once the service has answered with the stream (before its first event). */
  readonly onOpen?: (() => void) | undefined;
}

const EVENT_ID = /^([A-Za-z0-9_-]+):(\d+)$/;

/** The events of one live connection to `streamId`, until the service closes it. */
export function follow(
  connection: ServiceConnection,
  streamId: string,
  options: FollowOptions = {},
): AsyncGenerator<LiveEvent, void, undefined> {
  return followPath(connection, `/v1/streams/${encodeURIComponent(streamId)}/live`, options);
}

/** The events of one live connection to a live route (`path`: a stream's or a task's). */
export async function* followPath(
  connection: ServiceConnection,
  path: string,
  options: FollowOptions = {},
): AsyncGenerator<LiveEvent, void, undefined> {
  const idleMs = options.idleTimeoutMs ?? 60_000;
  const maxBytes = options.maxFrameBytes ?? 2 * 1_048_576;
  const watchdog = new AbortController();
  const signal = options.signal
    ? AbortSignal.any([options.signal, watchdog.signal])
    : watchdog.signal;
  const silence = (ms: number, what: string) =>
    setTimeout(() => watchdog.abort(new DeadlineExceeded(0, DeadlineExceeded.code, what)), ms);
  let timer = silence(connection.timeoutMs, `no answer within ${connection.timeoutMs} ms`);
  try {
    const headers: Record<string, string> = {};
    if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId;
    const response = await connection.openStream(path, headers, signal).catch((error: unknown) => {
      throw signal.aborted ? signal.reason : error;
    });
    options.onOpen?.();
    const body = response.body;
    if (body === null) return;
    clearTimeout(timer);
    timer = silence(idleMs, `the live stream was silent for ${idleMs} ms`);
    const reader = body.getReader();
    const beats = async function* (): AsyncGenerator<Uint8Array, void, undefined> {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          clearTimeout(timer);
          timer = silence(idleMs, `the live stream was silent for ${idleMs} ms`);
          yield value;
        }
      } finally {
        await reader.cancel().catch(() => undefined);
      }
    };
    for await (const frame of readFrames(beats(), {
      maxLineBytes: maxBytes,
      maxFrameBytes: maxBytes,
    })) {
      yield liveEvent(frame);
    }
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    if (error instanceof MalformedStream) {
      throw error.tooLarge
        ? new ResponseTooLarge(200, ResponseTooLarge.code, error.message)
        : invalid(error.message);
    }
    if (error instanceof EventLogError) throw error;
    const detail = error instanceof Error ? error.message : String(error);
    throw new ServiceUnreachable(0, ServiceUnreachable.code, detail, { cause: error });
  } finally {
    clearTimeout(timer);
    watchdog.abort();
  }
}

function invalid(detail: string): MalformedResponse {
  return new MalformedResponse(200, MalformedResponse.code, detail);
}

/** A frame as the contract defines it: a data event (it has an id), or a control event. */
function liveEvent(frame: SseFrame): LiveEvent {
  if (frame.id !== undefined) {
    const match = EVENT_ID.exec(frame.id);
    if (match === null)
      throw invalid(`a live event id is not <token>:<seq>: ${frame.id.slice(0, 80)}`);
    return {
      kind: "event",
      id: frame.id,
      generation: match[1] ?? "",
      seq: Number(match[2]),
      event: frame.event,
      data: frame.data,
    };
  }
  const body = controlBody(frame);
  if (frame.event === "reset" && typeof body["reason"] === "string") {
    const generation = body["generation"];
    if (generation === null || typeof generation === "string") {
      return { kind: "reset", reason: body["reason"], generation };
    }
  }
  if (
    frame.event === "end" &&
    typeof body["generation"] === "string" &&
    Number.isInteger(body["terminal_seq"])
  ) {
    return {
      kind: "end",
      generation: body["generation"],
      terminalSeq: Number(body["terminal_seq"]),
    };
  }
  throw invalid(
    `a live control event is not the contract's: ${frame.event} ${frame.data.slice(0, 80)}`,
  );
}

function controlBody(frame: SseFrame): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(frame.data);
  } catch {
    body = undefined;
  }
  if (!isRecord(body)) throw invalid(`a live ${frame.event} event is not a JSON object`);
  return body;
}
