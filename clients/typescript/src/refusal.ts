/**
 * How a refused resume is told: the JSON-RPC error a waiting request gets, and the error
 * thrown when no request can be named.
 */

import type { JSONRPCMessage, RequestId } from "@modelcontextprotocol/sdk/types.js";

import { Unjoinable } from "./encoding.js";
import { EventLogError } from "./errors.js";
import type { Verdict } from "./models.js";

/** JSON-RPC error code (implementation-defined range) of a refused resume, as in Python. */
export const RESUME_REFUSED = -32010;

/**
 * Why a resume was refused: the service's verdict and reason, or the store's own (shared with
 * the Python store, `docs/stream-names.md`, "Refusals"): `reset`/`not_stored`,
 * `invalid`/`cross_session`, `mid_message`, `not_a_message`, `shared_store`, and
 * `unavailable` with `unreachable`, `timeout` or the service's problem code.
 */
export interface Refusal {
  readonly verdict: Verdict | "unavailable";
  readonly reason: string;
  readonly detail: string;
}

/**
 * Thrown by `replayEventsAfter` when a refusal has no request to fail (the standalone GET
 * stream, a token of another session, an id the service does not know): the SDK answers the
 * client's GET with HTTP 500 and hands this error to the transport's `onerror`.
 */
export class ResumeRefused extends Error {
  constructor(
    readonly lastEventId: string,
    readonly refusal: Refusal,
  ) {
    super(
      `cannot resume ${lastEventId} (${refusal.verdict}: ${refusal.reason}): ${refusal.detail}`,
    );
    this.name = "ResumeRefused";
  }
}

export const NOT_STORED: Refusal = {
  verdict: "reset",
  reason: "not_stored",
  detail: "a message of this stream after the id could not be stored",
};

export const CROSS_SESSION: Refusal = {
  verdict: "invalid",
  reason: "cross_session",
  detail: "the event id does not belong to this session",
};

export const SHARED_STORE: Refusal = {
  verdict: "invalid",
  reason: "shared_store",
  detail: "this store served more than one session, so it can not tell them apart",
};

/** The JSON-RPC error that fails request `id` because its stream can not be resumed. */
export function refusalMessage(id: RequestId, refusal: Refusal): JSONRPCMessage {
  return {
    jsonrpc: "2.0",
    id,
    error: {
      code: RESUME_REFUSED,
      message: `cannot resume (${refusal.verdict}: ${refusal.reason}); discard partial output and re-issue`,
      data: { verdict: refusal.verdict, reason: refusal.reason, detail: refusal.detail },
    },
  };
}

/** The refusal a failed service call (or an unreadable stored event) amounts to. */
export function refusalOf(error: unknown): Refusal {
  if (error instanceof Unjoinable) {
    return { verdict: "invalid", reason: error.reason, detail: error.message };
  }
  if (error instanceof EventLogError) {
    const reset = error.code === "evicted" || error.code === "expired";
    return { verdict: reset ? "reset" : "unavailable", reason: error.code, detail: error.detail };
  }
  const timeout = error instanceof Error && error.name === "TimeoutError";
  return {
    verdict: "unavailable",
    reason: timeout ? "timeout" : "unreachable",
    detail: error instanceof Error ? error.message : String(error),
  };
}
