/**
 * One error class per problem `code` the service answers with.
 *
 * Every refusal of the service is an RFC 9457 problem with a stable `code`; programs match on
 * the class (`instanceof Superseded`) or on `.code`, never on the human-readable `.detail`.
 * A code this client does not know yet maps to the base class, so a newer service never
 * breaks an older client. The classes mirror the Python client's `errors.py`.
 */

import { isJsonMediaType } from "./body.js";

/**
 * A request the event-log service refused or could not answer.
 *
 * `status` is the HTTP status (0 when no response arrived), `code` the problem's stable code,
 * `detail` its human-readable explanation.
 */
export class EventLogError extends Error {
  /** The problem code this class stands for. */
  static readonly code: string = "error";

  readonly status: number;
  readonly code: string;
  readonly detail: string;

  constructor(status: number, code: string, detail: string, options?: { cause?: unknown }) {
    super(`${status} ${code}: ${detail}`, options);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

/** 409: the generation is no longer its stream's current one; its appends are fenced. */
export class Superseded extends EventLogError {
  static override readonly code = "superseded";
}

/** 409: the generation is finished; nothing more can be appended to it. */
export class TerminalGeneration extends EventLogError {
  static override readonly code = "terminal";
}

/** 409: the batch overlaps stored events with different content (or unverifiable ones). */
export class SeqConflict extends EventLogError {
  static override readonly code = "seq_conflict";
}

/** 409: `firstSeq` is beyond `tailSeq + 1`. */
export class SeqGap extends EventLogError {
  static override readonly code = "seq_gap";
}

/** 409: a page was asked for after a seq the generation never reached. */
export class BeyondTail extends EventLogError {
  static override readonly code = "beyond_tail";
}

/** 404: no generation has this token (for this tenant). */
export class UnknownGeneration extends EventLogError {
  static override readonly code = "unknown_generation";
}

/** 404: no stream has this id (for this tenant). */
export class UnknownStream extends EventLogError {
  static override readonly code = "unknown_stream";
}

/** 404: no such route. */
export class NotFound extends EventLogError {
  static override readonly code = "not_found";
}

/** 410: events in the requested range were evicted; the service never skips them. */
export class Evicted extends EventLogError {
  static override readonly code = "evicted";
}

/** 410: the generation's events were purged by its time to live. */
export class Expired extends EventLogError {
  static override readonly code = "expired";
}

/** 413: an event's data is over the service's limit. */
export class EventTooLarge extends EventLogError {
  static override readonly code = "event_too_large";
}

/** 413: a batch holds more events than the service accepts at once. */
export class BatchTooLarge extends EventLogError {
  static override readonly code = "batch_too_large";
}

/** 413: the request body is over the service's limit. */
export class BodyTooLarge extends EventLogError {
  static override readonly code = "body_too_large";
}

/** 408: the request body arrived too slowly. */
export class BodyTimeout extends EventLogError {
  static override readonly code = "body_timeout";
}

/** 415: the body was not declared as JSON. */
export class UnsupportedMediaType extends EventLogError {
  static override readonly code = "unsupported_media_type";
}

/** 422: the body is not valid JSON. */
export class InvalidJson extends EventLogError {
  static override readonly code = "invalid_json";
}

/** 422: the request does not match the schema or breaks a rule of the contract. */
export class ValidationFailed extends EventLogError {
  static override readonly code = "validation_error";
}

/** 401: no key, or a key the service does not know. */
export class Unauthorized extends EventLogError {
  static override readonly code = "unauthorized";
}

/** 403: the key's scope does not allow this request. */
export class Forbidden extends EventLogError {
  static override readonly code = "forbidden";
}

/** 503: the service's database is unreachable or locked; nothing was stored. */
export class DatabaseUnavailable extends EventLogError {
  static override readonly code = "database_unavailable";
}

/** 500: the service's database failed; nothing was stored. */
export class StorageFailed extends EventLogError {
  static override readonly code = "storage_error";
}

/** 500: an unexpected error in the service. */
export class InternalError extends EventLogError {
  static override readonly code = "internal_error";
}

/**
 * No response arrived (connection refused, timeout, broken connection), after retries.
 *
 * `status` is 0; the underlying error is the exception's `cause`.
 */
export class ServiceUnreachable extends EventLogError {
  static override readonly code = "unreachable";
}

/**
 * An answer that is not the service's: a 2xx whose body is not what the contract promises
 * (not JSON by its type or its bytes, over `maxResponseBytes`, missing fields), or a redirect
 * (never followed). `status` is the answer's. Never retried.
 */
export class InvalidResponse extends EventLogError {
  static override readonly code = "invalid_response";
}

type ErrorClass = (new (status: number, code: string, detail: string) => EventLogError) & {
  readonly code: string;
};

const BY_CODE: ReadonlyMap<string, ErrorClass> = new Map(
  [
    Superseded,
    TerminalGeneration,
    SeqConflict,
    SeqGap,
    BeyondTail,
    UnknownGeneration,
    UnknownStream,
    NotFound,
    Evicted,
    Expired,
    EventTooLarge,
    BatchTooLarge,
    BodyTooLarge,
    BodyTimeout,
    UnsupportedMediaType,
    InvalidJson,
    ValidationFailed,
    Unauthorized,
    Forbidden,
    DatabaseUnavailable,
    StorageFailed,
    InternalError,
  ].map((cls): [string, ErrorClass] => [cls.code, cls]),
);

/** The error for a problem `code`; the base class for a code this client lacks. */
export function errorFor(status: number, code: string, detail: string): EventLogError {
  const cls = BY_CODE.get(code) ?? EventLogError;
  return new cls(status, code, detail);
}

/** Read a refused response's body: a problem when it is one (JSON by its `Content-Type`, with
 *  a string `code`), else its bare status as `http_error`. */
export function errorFromBody(
  status: number,
  statusText: string,
  body: string,
  contentType: string | null = "application/problem+json",
): EventLogError {
  let problem: unknown;
  try {
    problem = isJsonMediaType(contentType) ? JSON.parse(body) : undefined;
  } catch {
    problem = undefined;
  }
  if (isRecord(problem) && typeof problem["code"] === "string") {
    const detail = problem["detail"];
    return errorFor(status, problem["code"], typeof detail === "string" ? detail : "");
  }
  return new EventLogError(status, "http_error", body.slice(0, 200) || statusText);
}

/** A JSON object (not an array, not null). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
