/**
 * How an MCP message is stored as events of the service, and read back.
 *
 * The convention both MCP stores (this one and the Python one) follow, written once in the
 * repository's `docs/stream-names.md` and checked by both test suites against one table
 * (`tests/fixtures/stream-convention.json`):
 *
 * - A priming event (the SDK stores `{}` to hand the client its first id) is one event of SSE
 *   type `priming` with empty data; it is never replayed as a message.
 * - A message is its JSON as one event of type `message`.
 * - A message over `maxEventBytes` (tool results can be several MiB; the service refuses an
 *   event over `EVENTLOG_MAX_EVENT_BYTES`, 1 MiB by default) is cut at UTF-8 character
 *   boundaries into `n` events of type `message-part <i>/<n>`. The SSE id the client sees is
 *   the last part's, so a client only ever holds the id of a whole message.
 * - Every message is one append: all its events are stored atomically, or none is.
 */

import { EventLogError } from "./error-base.js";
import type { NewEvent, StoredEvent } from "./models.js";

export const MESSAGE_EVENT = "message";
export const PART_EVENT = "message-part";
export const PRIMING_EVENT = "priming";

const PART = /^message-part ([1-9][0-9]*)\/([1-9][0-9]*)$/;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Whether the SDK handed over its priming event (an empty object) rather than a message. */
export function isPriming(message: object): boolean {
  return Object.keys(message).length === 0;
}

/** The events one SDK message is stored as (one, unless it is over `maxEventBytes`). */
export function encodeMessage(message: object, maxEventBytes: number): NewEvent[] {
  return splitMessage(isPriming(message) ? null : JSON.stringify(message), maxEventBytes);
}

/** The events a message's JSON is stored as (`null`: a priming event). */
export function splitMessage(data: string | null, maxEventBytes: number): NewEvent[] {
  if (data === null) return [{ data: "", event: PRIMING_EVENT }];
  // A UTF-16 length at most a third of the limit can not exceed it in UTF-8: skip encoding.
  if (data.length * 3 <= maxEventBytes) return [{ data, event: MESSAGE_EVENT }];
  const bytes = encoder.encode(data);
  if (bytes.length <= maxEventBytes) return [{ data, event: MESSAGE_EVENT }];
  const parts: string[] = [];
  let start = 0;
  while (start < bytes.length) {
    let end = Math.min(start + maxEventBytes, bytes.length);
    // Never cut inside a UTF-8 sequence: back up over continuation bytes (10xxxxxx).
    while (end < bytes.length && end > start && ((bytes[end] ?? 0) & 0xc0) === 0x80) end -= 1;
    if (end === start) throw new RangeError("maxEventBytes is smaller than one character");
    parts.push(decoder.decode(bytes.subarray(start, end)));
    start = end;
  }
  return parts.map((part, index) => ({
    data: part,
    event: `${PART_EVENT} ${index + 1}/${parts.length}`,
  }));
}

/** `[i, n]` of a `message-part <i>/<n>` event type, undefined for any other. */
export function partOf(eventType: string | null): [number, number] | undefined {
  const match = PART.exec(eventType ?? "");
  return match === null ? undefined : [Number(match[1]), Number(match[2])];
}

/**
 * Stored events that are not messages of the convention; `reason` (also its `code`) says how.
 * `status` is 0 (no answer is at fault: what was stored is); the message is the detail alone,
 * which is what a refusal's `detail` carries.
 */
export class Unjoinable extends EventLogError {
  constructor(
    readonly reason: "mid_message" | "not_a_message",
    message: string,
  ) {
    super(0, reason, message, { message });
  }
}

/** A message read back, with the id of its last event. */
export interface ReplayedMessage {
  readonly id: string;
  readonly seq: number;
  readonly message: unknown;
}

/**
 * Turns stored events back into messages, in order: drops priming events, joins parts.
 *
 * `push` returns the message an event completes (undefined for a part or a priming event);
 * it throws `Unjoinable`: `mid_message` for a part out of its place (a replay that started
 * inside a split message), `not_a_message` for data that is not a JSON-RPC message.
 */
export class MessageAssembler {
  private parts: string[] = [];
  private count = 0;

  push(event: Pick<StoredEvent, "id" | "seq" | "event" | "data">): ReplayedMessage | undefined {
    const part = partOf(event.event);
    if (part === undefined) {
      if (this.parts.length > 0) {
        throw new Unjoinable("mid_message", `a ${event.event} event inside a split message`);
      }
      if (event.event === PRIMING_EVENT) return undefined;
      return { id: event.id, seq: event.seq, message: parseMessage(event.id, event.data) };
    }
    const [index, count] = part;
    if (
      index !== this.parts.length + 1 ||
      (this.parts.length > 0 && count !== this.count) ||
      index > count
    ) {
      throw new Unjoinable("mid_message", `part ${index}/${count} without the parts before it`);
    }
    this.parts.push(event.data);
    this.count = count;
    if (index < count) return undefined;
    const data = this.parts.join("");
    this.parts = [];
    return { id: event.id, seq: event.seq, message: parseMessage(event.id, data) };
  }
}

function parseMessage(id: string, data: string): unknown {
  let message: unknown;
  try {
    message = JSON.parse(data);
  } catch {
    throw new Unjoinable("not_a_message", `event ${id} is not JSON`);
  }
  if (
    typeof message !== "object" ||
    message === null ||
    (message as { jsonrpc?: unknown }).jsonrpc !== "2.0"
  ) {
    throw new Unjoinable("not_a_message", `event ${id} is not a JSON-RPC message`);
  }
  return message;
}
