/**
 * The client's one error tree: every failure of a call is an `EventLogError`.
 *
 * ```
 * EventLogError                 status, code, detail (programs match on the class or `.code`)
 * ├── ServiceRefusal            the service answered a problem (RFC 9457) with a stable `code`:
 * │   ├── Superseded, TerminalGeneration, SeqConflict, … one class per code of
 * │   │   tests/fixtures/problem-codes.json (`static statuses`: the statuses it documents)
 * │   └── (a code this client does not know yet is a bare `ServiceRefusal`)
 * ├── HttpError                 a non-2xx answer without a problem body (a proxy's error page)
 * ├── ServiceUnreachable        no answer: connection refused or broken (status 0)
 * │   └── DeadlineExceeded      no whole answer within the attempt's deadline (status 0)
 * └── InvalidResponse           an answer this client will not act on (status: the answer's)
 *     ├── Redirected            a 3xx: never followed (the event data would go to another host)
 *     ├── UnexpectedContentType not the media type the route answers with (HTML from a proxy)
 *     ├── ResponseTooLarge      the decoded body (or one SSE line or frame) is over the cap
 *     └── MalformedResponse     not JSON or UTF-8, a field missing or of the wrong type, a
 *                               broken SSE frame
 * ```
 *
 * The tree, the codes and their statuses are the Python client's (`errors.py`; its
 * `UntrustedResponse` is `InvalidResponse` here). Which codes the service answers with is one
 * fact, kept in `tests/fixtures/problem-codes.json`; `test/errors.test.ts` checks this table
 * against it. A newer service never breaks an older client: an unknown code is a bare
 * `ServiceRefusal`.
 */

import { isJsonMediaType } from "./body.js";

/**
 * A request the event-log service refused, or that got no answer this client trusts.
 *
 * `status` is the HTTP status (0 when no response arrived), `code` the stable code, `detail`
 * the human-readable explanation.
 */
export class EventLogError extends Error {
  /** The code this class stands for. */
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

/** The service answered a problem with a stable `code`; each known code has a subclass. */
export class ServiceRefusal extends EventLogError {
  static override readonly code: string = "refused";
  /** The HTTP statuses the service documents for this code (none, for this base). */
  static readonly statuses: readonly number[] = [];
}

/** 409: the generation is no longer its stream's current one; its appends are fenced. */
export class Superseded extends ServiceRefusal {
  static override readonly code = "superseded";
  static override readonly statuses = [409];
}

/** 409: the generation is finished; nothing more can be appended to it. */
export class TerminalGeneration extends ServiceRefusal {
  static override readonly code = "terminal";
  static override readonly statuses = [409];
}

/** 409: the writer's lease ran out and the generation was abandoned; it is fenced. */
export class Abandoned extends ServiceRefusal {
  static override readonly code = "abandoned";
  static override readonly statuses = [409];
}

/** 409: the batch overlaps stored events with different content (or unverifiable ones). */
export class SeqConflict extends ServiceRefusal {
  static override readonly code = "seq_conflict";
  static override readonly statuses = [409];
}

/** 409: `firstSeq` is beyond `tailSeq + 1`. */
export class SeqGap extends ServiceRefusal {
  static override readonly code = "seq_gap";
  static override readonly statuses = [409];
}

/** 409: a page was asked for after a seq the generation never reached. */
export class BeyondTail extends ServiceRefusal {
  static override readonly code = "beyond_tail";
  static override readonly statuses = [409];
}

/** 404: no generation has this token (for this tenant). */
export class UnknownGeneration extends ServiceRefusal {
  static override readonly code = "unknown_generation";
  static override readonly statuses = [404];
}

/** 404: no stream has this id (for this tenant). */
export class UnknownStream extends ServiceRefusal {
  static override readonly code = "unknown_stream";
  static override readonly statuses = [404];
}

/** 404: no task of this id the caller may see (never issued, expired, or another's). */
export class UnknownTask extends ServiceRefusal {
  static override readonly code = "unknown_task";
  static override readonly statuses = [404];
}

/** 409: the worker's `attempt` of a task was never started. */
export class UnknownAttempt extends ServiceRefusal {
  static override readonly code = "unknown_attempt";
  static override readonly statuses = [409];
}

/** 409: a task status change its current status does not allow (`working → working`). */
export class InvalidTransition extends ServiceRefusal {
  static override readonly code = "invalid_transition";
  static override readonly statuses = [409];
}

/** 404: no such route. */
export class NotFound extends ServiceRefusal {
  static override readonly code = "not_found";
  static override readonly statuses = [404];
}

/** 410: events in the requested range were evicted; the service never skips them. */
export class Evicted extends ServiceRefusal {
  static override readonly code = "evicted";
  static override readonly statuses = [410];
}

/** 410 on a read, 409 on an append: the generation's events were purged by its time to live. */
export class Expired extends ServiceRefusal {
  static override readonly code = "expired";
  static override readonly statuses = [409, 410];
}

/** 413: an event's data is over the service's limit. */
export class EventTooLarge extends ServiceRefusal {
  static override readonly code = "event_too_large";
  static override readonly statuses = [413];
}

/** 413: a batch holds more events than the service accepts at once. */
export class BatchTooLarge extends ServiceRefusal {
  static override readonly code = "batch_too_large";
  static override readonly statuses = [413];
}

/** 413: the request body is over the service's limit. */
export class BodyTooLarge extends ServiceRefusal {
  static override readonly code = "body_too_large";
  static override readonly statuses = [413];
}

/** 408: the request body arrived too slowly. */
export class BodyTimeout extends ServiceRefusal {
  static override readonly code = "body_timeout";
  static override readonly statuses = [408];
}

/** 408: the request's head (request line and headers) arrived too slowly. */
export class HeaderTimeout extends ServiceRefusal {
  static override readonly code = "header_timeout";
  static override readonly statuses = [408];
}

/** 431: the request's headers are over the service's size or count limit. */
export class HeadersTooLarge extends ServiceRefusal {
  static override readonly code = "headers_too_large";
  static override readonly statuses = [431];
}

/** 422: an event's type is one the service's live reads use for control events. */
export class ReservedEventType extends ServiceRefusal {
  static override readonly code = "reserved_event_type";
  static override readonly statuses = [422];
}

/** 503: the service holds as many connections as it may; retry later. */
export class TooManyConnections extends ServiceRefusal {
  static override readonly code = "too_many_connections";
  static override readonly statuses = [503];
}

/** 415: the body was not declared as JSON. */
export class UnsupportedMediaType extends ServiceRefusal {
  static override readonly code = "unsupported_media_type";
  static override readonly statuses = [415];
}

/** 422: the body is not valid JSON. */
export class InvalidJson extends ServiceRefusal {
  static override readonly code = "invalid_json";
  static override readonly statuses = [422];
}

/** 422: the request does not match the schema or breaks a rule of the contract. */
export class ValidationFailed extends ServiceRefusal {
  static override readonly code = "validation_error";
  static override readonly statuses = [422];
}

/** 401: no key, or a key the service does not know. */
export class Unauthorized extends ServiceRefusal {
  static override readonly code = "unauthorized";
  static override readonly statuses = [401];
}

/** 403: the key's scope does not allow this request. */
export class Forbidden extends ServiceRefusal {
  static override readonly code = "forbidden";
  static override readonly statuses = [403];
}

/** 503: the service's database is unreachable or locked; nothing was stored. */
export class DatabaseUnavailable extends ServiceRefusal {
  static override readonly code = "database_unavailable";
  static override readonly statuses = [503];
}

/** 500: the service's database failed; nothing was stored. */
export class StorageFailed extends ServiceRefusal {
  static override readonly code = "storage_error";
  static override readonly statuses = [500];
}

/** 500: an unexpected error in the service. */
export class InternalError extends ServiceRefusal {
  static override readonly code = "internal_error";
  static override readonly statuses = [500];
}

/** 400: the claim is not `<token>:<seq>` (the live route). */
export class MalformedId extends ServiceRefusal {
  static override readonly code = "malformed_id";
  static override readonly statuses = [400];
}

/** 409: the token's stream is not the stream asked about (the live route). */
export class CrossStream extends ServiceRefusal {
  static override readonly code = "cross_stream";
  static override readonly statuses = [409];
}

/** 409: the request names a stream ambiguously. */
export class AmbiguousStream extends ServiceRefusal {
  static override readonly code = "ambiguous_stream";
  static override readonly statuses = [409];
}

/** 406: the client accepts none of the media types the route answers with. */
export class NotAcceptable extends ServiceRefusal {
  static override readonly code = "not_acceptable";
  static override readonly statuses = [406];
}

/** 503: the process serves as many live readers as it may; retry later. */
export class TooManyReaders extends ServiceRefusal {
  static override readonly code = "too_many_readers";
  static override readonly statuses = [503];
}

/** 503: the process sends as many pages of events at once as it may; retry later. */
export class TooManyPages extends ServiceRefusal {
  static override readonly code = "too_many_pages";
  static override readonly statuses = [503];
}

/** 409: (the gateway) a claim of another MCP session or another credential. */
export class CrossSession extends ServiceRefusal {
  static override readonly code = "cross_session";
  static override readonly statuses = [409];
}

/** 502: (the gateway) its upstream MCP server is unreachable or failed before answering. */
export class UpstreamUnavailable extends ServiceRefusal {
  static override readonly code = "upstream_unavailable";
  static override readonly statuses = [502];
}

/** 503: (the gateway's `/readyz`) its upstream MCP server does not answer. */
export class UpstreamUnreachable extends ServiceRefusal {
  static override readonly code = "upstream_unreachable";
  static override readonly statuses = [503];
}

/** 400: the request is not well-formed HTTP for this route (e.g. two `Last-Event-ID` headers). */
export class BadRequest extends ServiceRefusal {
  static override readonly code = "bad_request";
  static override readonly statuses = [400];
}

/** 405: the route does not answer this method. */
export class MethodNotAllowed extends ServiceRefusal {
  static override readonly code = "method_not_allowed";
  static override readonly statuses = [405];
}

/** 421: the `Host` names no host this service answers as. */
export class HostNotAllowed extends ServiceRefusal {
  static override readonly code = "host_not_allowed";
  static override readonly statuses = [421];
}

/** 403: a browser page of another origin sent the request. */
export class OriginNotAllowed extends ServiceRefusal {
  static override readonly code = "origin_not_allowed";
  static override readonly statuses = [403];
}

/** 503: the process holds as many request bodies as it may; retry later. */
export class Overloaded extends ServiceRefusal {
  static override readonly code = "overloaded";
  static override readonly statuses = [503];
}

/** 503 (`/readyz`): the database schema is not at the newest migration. */
export class SchemaNotCurrent extends ServiceRefusal {
  static override readonly code = "schema_not_current";
  static override readonly statuses = [503];
}

/** 503 (`/readyz`): a background task of the service is not running. */
export class BackgroundTaskDown extends ServiceRefusal {
  static override readonly code = "background_task_down";
  static override readonly statuses = [503];
}

/** A non-2xx answer without a problem body (a proxy's or a load balancer's page). */
export class HttpError extends EventLogError {
  static override readonly code = "http_error";
}

/**
 * No response arrived (connection refused, broken connection), after retries.
 *
 * `status` is 0; the underlying error is the exception's `cause`.
 */
export class ServiceUnreachable extends EventLogError {
  static override readonly code: string = "unreachable";
}

/** The answer did not arrive whole within the attempt's deadline (a service that drips, or
 *  a live stream silent past its idle timeout). */
export class DeadlineExceeded extends ServiceUnreachable {
  static override readonly code = "timeout";
}

/**
 * An answer this client will not act on: it is not the service's, or not what the contract
 * promises. `status` is the answer's. Never retried.
 */
export class InvalidResponse extends EventLogError {
  static override readonly code: string = "invalid_response";
}

/** A 3xx: never followed (it would carry the request, event data and key included, away). */
export class Redirected extends InvalidResponse {
  static override readonly code = "redirected";
}

/** Not the media type the route answers with (HTML from a captive proxy, a mistyped URL). */
export class UnexpectedContentType extends InvalidResponse {
  static override readonly code = "unexpected_content_type";
}

/** The decoded answer (a gzip bomb is cut too), or one SSE line or frame, is over the cap. */
export class ResponseTooLarge extends InvalidResponse {
  static override readonly code = "response_too_large";
}

/** Not JSON or not UTF-8, a field missing or of the wrong type, a broken SSE frame. */
export class MalformedResponse extends InvalidResponse {
  static override readonly code = "malformed_response";
}

/** A class of the table: constructed with (status, code, detail), with its code and status. */
export type RefusalClass = (new (
  status: number,
  code: string,
  detail: string,
) => ServiceRefusal) & {
  readonly code: string;
  readonly statuses: readonly number[];
};

const BY_CODE: ReadonlyMap<string, RefusalClass> = new Map(
  [
    Superseded,
    TerminalGeneration,
    Abandoned,
    SeqConflict,
    SeqGap,
    BeyondTail,
    UnknownGeneration,
    UnknownStream,
    UnknownTask,
    UnknownAttempt,
    InvalidTransition,
    NotFound,
    Evicted,
    Expired,
    EventTooLarge,
    BatchTooLarge,
    BodyTooLarge,
    BodyTimeout,
    HeaderTimeout,
    HeadersTooLarge,
    ReservedEventType,
    TooManyConnections,
    UnsupportedMediaType,
    InvalidJson,
    ValidationFailed,
    Unauthorized,
    Forbidden,
    DatabaseUnavailable,
    StorageFailed,
    InternalError,
    MalformedId,
    CrossStream,
    AmbiguousStream,
    NotAcceptable,
    TooManyReaders,
    TooManyPages,
    BadRequest,
    MethodNotAllowed,
    HostNotAllowed,
    OriginNotAllowed,
    Overloaded,
    SchemaNotCurrent,
    BackgroundTaskDown,
    CrossSession,
    UpstreamUnavailable,
    UpstreamUnreachable,
  ].map((cls): [string, RefusalClass] => [cls.code, cls]),
);

/** Every problem code this client knows, with its class. */
export function refusalClasses(): ReadonlyMap<string, RefusalClass> {
  return BY_CODE;
}

/** The error for a problem `code`; a bare `ServiceRefusal` for a code this client lacks. */
export function errorFor(status: number, code: string, detail: string): ServiceRefusal {
  const cls = BY_CODE.get(code) ?? ServiceRefusal;
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
  return new HttpError(status, HttpError.code, body.slice(0, 200) || statusText);
}

/** A JSON object (not an array, not null). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
