/**
 * Reading what the service answered, without trusting it to be small, quick or JSON.
 *
 * A mistyped `EVENTLOG_URL`, a captive proxy or a broken middlebox answers too: with HTML,
 * with a body that never ends, with a gzip bomb. The connection reads every body through
 * `readBody`, which counts *decoded* bytes (after the platform's `fetch` has undone any
 * `Content-Encoding`), so no answer can hold more than its cap in memory.
 */

import { MalformedResponse } from "./errors.js";

/** The most of an error answer that is read: enough for any problem document. */
export const ERROR_BODY_BYTES = 64 * 1024;

/** A body, or as much of it as the cap allowed. */
export interface BodyText {
  readonly text: string;
  /** False when the body went past the cap; `text` is then what came before it. */
  readonly complete: boolean;
}

/**
 * A body that is not UTF-8: a malformed answer. The reader does not keep the answer's status,
 * so `status` is 0 (the connection reports it with the status); the message is the detail.
 */
export class NotUtf8 extends MalformedResponse {
  constructor() {
    const detail = "the answer is not UTF-8";
    super(0, MalformedResponse.code, detail, { message: detail });
  }
}

/**
 * Read `response`'s body as UTF-8, at most `maxBytes` decoded bytes of it.
 *
 * Past the cap the body is cancelled (the connection is closed, not drained) and what came
 * before it is returned with `complete: false`. Throws `NotUtf8` for bytes that are not
 * UTF-8, and whatever the body's stream throws (an abort, a broken connection).
 */
export async function readBody(response: Response, maxBytes: number): Promise<BodyText> {
  const body = response.body;
  if (body === null) return { text: "", complete: true };
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const parts: string[] = [];
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const room = maxBytes - bytes;
      bytes += value.byteLength;
      if (value.byteLength > room) {
        parts.push(decode(decoder, value.subarray(0, room), true));
        await reader.cancel().catch(() => undefined);
        return { text: parts.join(""), complete: false };
      }
      parts.push(decode(decoder, value, true));
    }
    parts.push(decode(decoder, undefined, false));
  } finally {
    reader.releaseLock();
  }
  return { text: parts.join(""), complete: true };
}

type Utf8Decoder = Pick<InstanceType<typeof TextDecoder>, "decode">;

function decode(decoder: Utf8Decoder, bytes: Uint8Array | undefined, stream: boolean): string {
  try {
    return decoder.decode(bytes, { stream });
  } catch {
    throw new NotUtf8();
  }
}
