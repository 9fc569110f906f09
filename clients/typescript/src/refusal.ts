/**
 * How a refused resume is told: the JSON-RPC error a waiting request gets, and the error
 * thrown when no request can be named.
 */

import { Unjoinable } from "./encoding.js";
import { EventLogError } from "./errors.js";
import type { Verdict } from "./models.js";
import type { McpMessage, RequestId } from "./sdk.js";

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
 * A refusal that names no request (the standalone GET stream, a token of another session, an
 * id the service does not know, a malformed id): the client gets the refusal without an `id`,
 * and the store hands this error to the attached transport's `onerror`, so the server sees it
 * where it sees the transport's own errors.
 */
export class ResumeRefused extends EventLogError {
  static override readonly code = "resume_refused";

  /** `status` 0, `code` `resume_refused`, `detail` the refusal's. */
  constructor(
    readonly lastEventId: string,
    readonly refusal: Refusal,
  ) {
    super(0, ResumeRefused.code, refusal.detail, {
      message: `cannot resume ${lastEventId} (${refusal.verdict}: ${refusal.reason}): ${refusal.detail}`,
    });
  }
}

/** One of the store's own refusals. */
function own(verdict: Refusal["verdict"], reason: string, detail: string): Refusal {
  return { verdict, reason, detail };
}

export const NOT_STORED = own(
  "reset",
  "not_stored",
  "a message of this stream after the id could not be stored",
);
export const CROSS_SESSION = own(
  "invalid",
  "cross_session",
  "the event id does not belong to this session",
);
export const SHARED_STORE = own(
  "invalid",
  "shared_store",
  "this store served more than one session, so it can not tell them apart",
);
export const MALFORMED = own("invalid", "malformed_id", "the event id is not <token>:<seq>");

/**
 * The JSON-RPC error that fails request `id` because its stream can not be resumed; with no
 * `id`, an error without the member (never `"id": null`: the MCP schema allows a missing id,
 * not a null one, and the 2.x clients drop a message with a null id).
 */
export function refusalMessage(id: RequestId | undefined, refusal: Refusal): McpMessage {
  const error = {
    code: RESUME_REFUSED,
    message: `cannot resume (${refusal.verdict}: ${refusal.reason}); discard partial output and re-issue`,
    data: { verdict: refusal.verdict, reason: refusal.reason, detail: refusal.detail },
  };
  return id === undefined ? { jsonrpc: "2.0", error } : { jsonrpc: "2.0", id, error };
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
