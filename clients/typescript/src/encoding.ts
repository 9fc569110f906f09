/**
 * How an MCP message is stored as events of the service, and read back.
 *
 * - A priming event (the SDK stores `{}` to hand the client its first id) is one event of SSE
 *   type `priming` with empty data; it is never replayed as a message.
 * - A message is its JSON as one event of type `message`, like the Python store.
 * - A message over `maxEventBytes` (tool results can be several MiB; the service refuses an
 *   event over `EVENTLOG_MAX_EVENT_BYTES`, 1 MiB by default) is split at UTF-8 character
 *   boundaries into events of type `message-part` followed by a last `message` event, all
 *   appended as one atomic batch. The SSE id the client sees is the last event's, so a client
 *   only ever holds the id of a whole message.
 */

import type { NewEvent, StoredEvent } from "./models.js";

export const MESSAGE_EVENT = "message";
export const PART_EVENT = "message-part";
export const PRIMING_EVENT = "priming";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Whether the SDK handed over its priming event (an empty object) rather than a message. */
export function isPriming(message: object): boolean {
  return Object.keys(message).length === 0;
}

/** The events one SDK message is stored as (one, unless it is over `maxEventBytes`). */
export function encodeMessage(message: object, maxEventBytes: number): NewEvent[] {
  if (isPriming(message)) return [{ data: "", event: PRIMING_EVENT }];
  const data = JSON.stringify(message);
  // A UTF-16 length at most a third of the limit can not exceed it in UTF-8: skip encoding.
  if (data.length * 3 <= maxEventBytes) return [{ data, event: MESSAGE_EVENT }];
  const bytes = encoder.encode(data);
  if (bytes.length <= maxEventBytes) return [{ data, event: MESSAGE_EVENT }];
  const events: NewEvent[] = [];
  let start = 0;
  while (start < bytes.length) {
    let end = Math.min(start + maxEventBytes, bytes.length);
    // Never cut inside a UTF-8 sequence: back up over continuation bytes (10xxxxxx).
    while (end < bytes.length && end > start && ((bytes[end] ?? 0) & 0xc0) === 0x80) end -= 1;
    if (end === start) throw new RangeError("maxEventBytes is smaller than one character");
    const last = end === bytes.length;
    events.push({
      data: decoder.decode(bytes.subarray(start, end)),
      event: last ? MESSAGE_EVENT : PART_EVENT,
    });
    start = end;
  }
  return events;
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
 * it throws `SyntaxError` for data that is not a JSON-RPC message (a replay that started in
 * the middle of a split message, or an event this store did not write).
 */
export class MessageAssembler {
  private parts: string[] = [];

  push(event: StoredEvent): ReplayedMessage | undefined {
    if (event.event === PRIMING_EVENT) {
      this.parts = [];
      return undefined;
    }
    if (event.event === PART_EVENT) {
      this.parts.push(event.data);
      return undefined;
    }
    const data = this.parts.length === 0 ? event.data : this.parts.join("") + event.data;
    this.parts = [];
    const message: unknown = JSON.parse(data);
    if (
      typeof message !== "object" ||
      message === null ||
      (message as { jsonrpc?: unknown }).jsonrpc !== "2.0"
    ) {
      throw new SyntaxError(`event ${event.id} is not a JSON-RPC message`);
    }
    return { id: event.id, seq: event.seq, message };
  }
}
