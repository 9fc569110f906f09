/**
 * What the append channel reads of what the service sends: an answer frame's outcome (the
 * REST append's typed error for a refusal), the answer to a many-generation lease frame, and
 * why an upgrade or a socket failed. `channel.ts` has the rules of the channel.
 */

import type { IncomingMessage } from "node:http";

import type { RawData } from "ws";

import { ERROR_BODY_BYTES } from "./body.js";
import {
  DeadlineExceeded,
  errorFor,
  errorFromBody,
  EventLogError,
  HttpError,
  InvalidResponse,
  isJsonMediaType,
  isRecord,
  MalformedResponse,
  Redirected,
  ResponseTooLarge,
  ServiceUnreachable,
} from "./errors.js";
import { type LeaseRenewal, parseLeaseRenewal } from "./models.js";

/** The channel could not be opened (see `channel.ts`): send over REST instead. Status 0. */
export class ChannelUnavailable extends ServiceUnreachable {
  static override readonly code = "channel_unavailable";
}

/** The most generations one lease frame renews (the service's limit). */
export const MAX_LEASE_FRAME_GENERATIONS = 1_000;

/** The answer to a many-generation lease frame: each generation's renewal or refusal. */
export function parseLeases(body: unknown): Map<string, LeaseRenewal | EventLogError> {
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
export function refusalFrame(status: unknown, body: Record<string, unknown>): EventLogError {
  const code = body["code"];
  const detail = typeof body["detail"] === "string" ? body["detail"] : "";
  if (typeof status !== "number" || !Number.isInteger(status)) {
    return new MalformedResponse(0, MalformedResponse.code, "the channel's answer has no status");
  }
  if (typeof code === "string") return errorFor(status, code, detail);
  return new HttpError(status, HttpError.code, detail || `status ${status}`);
}

/** Why the upgrade was answered with something else than 101: read up to the error cap. */
export async function upgradeRefusal(response: IncomingMessage): Promise<EventLogError> {
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
export function wsProtocolError(error: Error | undefined): InvalidResponse | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code !== "string" || !code.startsWith("WS_ERR_")) return undefined;
  const detail = `the channel sent a frame that cannot be read: ${error?.message ?? code}`;
  if (code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") {
    return new ResponseTooLarge(0, ResponseTooLarge.code, detail);
  }
  return new MalformedResponse(0, MalformedResponse.code, detail);
}

export function unreachable(error: Error | undefined): ServiceUnreachable {
  const detail = `the channel dropped before answering: ${describe(error)}`;
  return error instanceof DeadlineExceeded
    ? error
    : new ServiceUnreachable(0, ServiceUnreachable.code, detail, { cause: error });
}

export function rawText(data: RawData): string | undefined {
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

export function describe(error: unknown): string {
  if (error === undefined) return "no reason given";
  return error instanceof Error ? error.message : String(error);
}

/** An answer frame read as the answer to the oldest unanswered frame (wire id `expected`,
 *  undefined when none is unanswered): its body, or why the channel can no longer be trusted
 *  to keep the order. */
export function readAnswer(
  data: RawData,
  binary: boolean,
  expected: number | undefined,
): { readonly body: Record<string, unknown> } | { readonly broken: MalformedResponse } {
  const text = binary ? undefined : rawText(data);
  let body: unknown;
  try {
    body = text === undefined ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  const id = isRecord(body) ? body["id"] : undefined;
  if (expected !== undefined && isRecord(body) && id === expected) return { body };
  const what = binary
    ? "a binary frame"
    : expected === undefined
      ? "an answer to no frame"
      : !isRecord(body)
        ? `not a JSON object: ${(text ?? "").slice(0, 200)}`
        : `the answer to frame ${JSON.stringify(id)}, not ${expected}`;
  return { broken: new MalformedResponse(0, MalformedResponse.code, `the channel sent ${what}`) };
}
