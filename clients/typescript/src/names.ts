/**
 * How an MCP session's SDK stream is named as a stream of the service.
 *
 * A service stream id is `mcp.<scope>.<sdk stream, escaped>`: `<scope>` is the random key of
 * one MCP session (one `EventLogEventStore`), the SDK stream is the id the SDK's transport
 * names the stream by (a random UUID per POST, `_GET_stream` for the standalone stream).
 * Every UTF-8 byte outside `[A-Za-z0-9_.-]` is written `~xx` (lower-case hex), so the id stays
 * within the contract's alphabet and reads back exactly. A name that would be longer than 256
 * characters is `mcp.<scope>.~h<sha256 hex of the SDK stream id>` instead.
 *
 * This is the scheme of the Python store (`names.py`) byte for byte, so an operator reads
 * streams of either language alike; the repository's `tests/fixtures/stream-convention.json`
 * is the shared table both test suites read.
 */

import { BoundedMap } from "./bounded.js";

export const PREFIX = "mcp";
export const MAX_STREAM_ID = 256;
const HASHED = "~h";
const PLAIN = /^[A-Za-z0-9_.-]$/;
const ESCAPE = /~([0-9a-f]{2})/g;
const encoder = new TextEncoder();
const strictDecoder = new TextDecoder("utf-8", { fatal: true });

/** `sdkStream` with every UTF-8 byte outside `[A-Za-z0-9_.-]` written as `~xx`. */
export function escapeSdkStream(sdkStream: string): string {
  let escaped = "";
  for (const byte of encoder.encode(sdkStream)) {
    const char = String.fromCharCode(byte);
    escaped += byte < 0x80 && PLAIN.test(char) ? char : `~${byte.toString(16).padStart(2, "0")}`;
  }
  return escaped;
}

/** The SDK stream id an escaped one stands for, or undefined when it is not valid UTF-8. */
export function unescapeSdkStream(escaped: string): string | undefined {
  const raw = escaped.replace(ESCAPE, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i += 1) {
    const code = raw.charCodeAt(i);
    if (code > 0xff) return undefined;
    bytes[i] = code;
  }
  try {
    return strictDecoder.decode(bytes);
  } catch {
    return undefined;
  }
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", encoder.encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The session scope and SDK stream a service stream id was made from. */
export interface ParsedName {
  readonly scope: string;
  readonly sdkStream: string;
}

/**
 * Names SDK streams as service streams and reads the names back.
 *
 * A hashed name (an SDK stream id too long to fit escaped) can only be read back by the
 * object that made it; at most `maxHashed` of them are remembered, which is enough since an
 * MCP session lives in one process.
 */
export class StreamNames {
  private readonly hashed: BoundedMap<string, string>;

  constructor(maxHashed = 10_000) {
    this.hashed = new BoundedMap(maxHashed);
  }

  /** The service stream id of `sdkStream` in the session `scope` (an ASCII key without `.`). */
  async name(scope: string, sdkStream: string): Promise<string> {
    const head = `${PREFIX}.${scope}.`;
    const escaped = escapeSdkStream(sdkStream);
    if (head.length + escaped.length <= MAX_STREAM_ID) return head + escaped;
    const digest = HASHED + (await sha256Hex(sdkStream));
    this.hashed.set(digest, sdkStream);
    return head + digest;
  }

  /** The scope and SDK stream of a name made by `name`, or undefined if it is not one. */
  parse(streamId: string): ParsedName | undefined {
    const [prefix, scope, ...rest] = streamId.split(".");
    if (prefix !== PREFIX || !scope || rest.length === 0) return undefined;
    const escaped = rest.join(".");
    const sdkStream = escaped.startsWith(HASHED)
      ? this.hashed.get(escaped)
      : unescapeSdkStream(escaped);
    return sdkStream === undefined ? undefined : { scope, sdkStream };
  }
}
