/**
 * Reading a `text/event-stream` body, bounded: the frames of the service's live route.
 *
 * The parser is the WHATWG one (fields `id`, `event`, `data`, `retry`; comments; LF, CRLF or
 * CR line ends; `data` lines joined with LF), with two limits a hostile or broken peer cannot
 * get around: a line longer than `maxLineBytes` and a frame whose data is longer than
 * `maxFrameBytes` end the stream with `MalformedStream`, instead of growing a buffer without
 * end. Bytes that are not UTF-8 end it the same way.
 */

import { InvalidResponse, MalformedResponse, ResponseTooLarge } from "./errors.js";

/** One dispatched SSE event. `id` is absent when the frame had no `id:` line. */
export interface SseFrame {
  readonly id?: string;
  readonly event: string;
  readonly data: string;
}

/** How far a stream may go before it is refused. */
export interface SseLimits {
  /** The longest line, in UTF-8 bytes. */
  readonly maxLineBytes: number;
  /** The most data of one frame, in UTF-8 bytes. */
  readonly maxFrameBytes: number;
}

/**
 * A live stream that is not a well-formed, bounded event stream: an answer this client will
 * not act on, coded `response_too_large` or `malformed_response` as the live read reports it.
 * The parser does not see the answer, so `status` is 0; the message is the detail alone.
 */
export class MalformedStream extends InvalidResponse {
  /** `tooLarge`: a line or a frame over its limit (else the bytes are not well-formed). */
  constructor(
    detail: string,
    readonly tooLarge = false,
  ) {
    const code = tooLarge ? ResponseTooLarge.code : MalformedResponse.code;
    super(0, code, detail, { message: detail });
  }
}

/** The frames of `body`, in order, until it ends (or throws `MalformedStream`). */
export async function* readFrames(
  body: AsyncIterable<Uint8Array>,
  limits: SseLimits,
): AsyncGenerator<SseFrame, void, undefined> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const frame = new FrameBuilder(limits.maxFrameBytes);
  let pending = "";
  let skipLf = false;
  for await (const chunk of body) {
    let text: string;
    try {
      text = decoder.decode(chunk, { stream: true });
    } catch {
      throw new MalformedStream("the live stream is not UTF-8");
    }
    let start = 0;
    for (let i = 0; i < text.length; i += 1) {
      const char = text.charCodeAt(i);
      if (char !== 10 && char !== 13) continue;
      const line = pending + text.slice(start, i);
      pending = "";
      start = i + 1;
      if (char === 10 && skipLf && line === "") {
        skipLf = false;
        continue;
      }
      skipLf = char === 13;
      const dispatched = frame.line(line);
      if (dispatched !== undefined) yield dispatched;
    }
    pending += text.slice(start);
    // UTF-16 units bound UTF-8 bytes from below, so this errs only towards refusing later.
    if (pending.length > limits.maxLineBytes) {
      throw new MalformedStream(`a live stream line is over ${limits.maxLineBytes} bytes`, true);
    }
  }
}

/** Accumulates one frame's fields, line by line (WHATWG "interpret an event stream"). */
class FrameBuilder {
  private data: string[] = [];
  private dataBytes = 0;
  private event = "";
  private id: string | undefined;

  constructor(private readonly maxFrameBytes: number) {}

  /** Take one line; a blank line dispatches the frame (none when it has no data). */
  line(line: string): SseFrame | undefined {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") {
      this.dataBytes += value.length + 1;
      if (this.dataBytes > this.maxFrameBytes) {
        throw new MalformedStream(`a live frame is over ${this.maxFrameBytes} bytes of data`, true);
      }
      this.data.push(value);
    } else if (name === "event") {
      this.event = value;
    } else if (name === "id" && !value.includes("\0")) {
      this.id = value;
    }
    return undefined;
  }

  private dispatch(): SseFrame | undefined {
    const frame =
      this.data.length === 0
        ? undefined
        : {
            event: this.event || "message",
            data: this.data.join("\n"),
            ...(this.id === undefined ? {} : { id: this.id }),
          };
    this.data = [];
    this.dataBytes = 0;
    this.event = "";
    this.id = undefined;
    return frame;
  }
}
