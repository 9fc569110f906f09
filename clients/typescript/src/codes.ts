/**
 * The service's problem codes as error classes, each under the group that says what a
 * caller does next (`errors.ts` draws the whole tree).
 *
 * Written by `make codes` from the service's table (`app/api/problem_table.py`); do not
 * edit it here: `tests/api/test_code_tables.py` fails when this file is not what
 * `make codes` writes.
 */

import { type RefusalClass, refusal, ServiceRefusal } from "./error-base.js";

type Group = typeof ServiceRefusal;

/**
 * The request contradicts what is stored (a seq out of order, a claim past the tail or of another
 * stream or session, a task change its status forbids): read the state again before deciding; the
 * same request fails the same way.
 */
export class ConflictError extends ServiceRefusal {}

/** 409: a claim or a page after a seq the generation never reached. */
export class BeyondTail extends refusal(ConflictError, "beyond_tail", [409]) {}

/** 409: the gateway: a claim of another MCP session or another credential. */
export class CrossSession extends refusal(ConflictError, "cross_session", [409]) {}

/** 409: a live read's claim names a generation of another stream. */
export class CrossStream extends refusal(ConflictError, "cross_stream", [409]) {}

/** 409: a task status change the task's state does not allow. */
export class InvalidTransition extends refusal(ConflictError, "invalid_transition", [409]) {}

/** 409: the batch overlaps stored events with other content (or unverifiable ones). */
export class SeqConflict extends refusal(ConflictError, "seq_conflict", [409]) {}

/** 409: first_seq is beyond tail_seq + 1. */
export class SeqGap extends refusal(ConflictError, "seq_gap", [409]) {}

/** 409: a task attempt number that was never started. */
export class UnknownAttempt extends refusal(ConflictError, "unknown_attempt", [409]) {}

/** Nothing has that id for this key's tenant (or no such route): check the id. */
export class NotFoundError extends ServiceRefusal {}

/** 404: no such route (or console file). */
export class NotFound extends refusal(NotFoundError, "not_found", [404]) {}

/** 404: no generation has this token (for this tenant). */
export class UnknownGeneration extends refusal(NotFoundError, "unknown_generation", [404]) {}

/** 404: no stream has this id (for this tenant). */
export class UnknownStream extends refusal(NotFoundError, "unknown_stream", [404]) {}

/** 404: no task of this id the caller may see (unknown, expired or another's). */
export class UnknownTask extends refusal(NotFoundError, "unknown_task", [404]) {}

/**
 * What was asked for was there and is no longer kept (evicted, expired): start over from what is
 * kept; the service never skips it silently.
 */
export class GoneError extends ServiceRefusal {}

/** 410: events of the requested range were evicted (never skipped). */
export class Evicted extends refusal(GoneError, "evicted", [410]) {}

/**
 * 410: the generation's events were purged by its time to live (409: an append to a generation its
 * time to live expired).
 */
export class Expired extends refusal(GoneError, "expired", [409, 410]) {}

/**
 * Over a size limit of the service: send less at once (smaller events, fewer events per batch,
 * fewer or smaller headers).
 */
export class TooLargeError extends ServiceRefusal {}

/** 413: a batch holds more events than EVENTLOG_MAX_BATCH_EVENTS. */
export class BatchTooLarge extends refusal(TooLargeError, "batch_too_large", [413]) {}

/** 413: the body is over EVENTLOG_MAX_BODY_BYTES. */
export class BodyTooLarge extends refusal(TooLargeError, "body_too_large", [413]) {}

/** 413: an event's data is over EVENTLOG_MAX_EVENT_BYTES. */
export class EventTooLarge extends refusal(TooLargeError, "event_too_large", [413]) {}

/** 431: a request's head is over EVENTLOG_MAX_HEADER_BYTES or EVENTLOG_MAX_HEADERS lines. */
export class HeadersTooLarge extends refusal(TooLargeError, "headers_too_large", [431]) {}

/**
 * The service, its database or the gateway's upstream cannot take the request now (busy, starting,
 * a slow body): nothing was stored; retry after a while, after `Retry-After` when the answer
 * carries it.
 */
export class RetryLaterError extends ServiceRefusal {}

/** 503: readiness: a background task of the process is down. */
export class BackgroundTaskDown extends refusal(RetryLaterError, "background_task_down", [503]) {}

/** 408: the body did not arrive within EVENTLOG_BODY_TIMEOUT_SECONDS. */
export class BodyTimeout extends refusal(RetryLaterError, "body_timeout", [408]) {}

/** 503: the database is unreachable, restarting or busy; nothing was stored. */
export class DatabaseUnavailable extends refusal(RetryLaterError, "database_unavailable", [503]) {}

/** 408: a request's head did not arrive within EVENTLOG_HEADER_TIMEOUT_SECONDS. */
export class HeaderTimeout extends refusal(RetryLaterError, "header_timeout", [408]) {}

/** 503: the process holds as many request bodies as it may. */
export class Overloaded extends refusal(RetryLaterError, "overloaded", [503]) {}

/** 503: readiness: the database schema is not the newest. */
export class SchemaNotCurrent extends refusal(RetryLaterError, "schema_not_current", [503]) {}

/** 503: the process holds EVENTLOG_MAX_CONNECTIONS connections. */
export class TooManyConnections extends refusal(RetryLaterError, "too_many_connections", [503]) {}

/** 503: the process sends as many pages of events at once as it may (count or bytes). */
export class TooManyPages extends refusal(RetryLaterError, "too_many_pages", [503]) {}

/** 503: the process serves EVENTLOG_LIVE_MAX_READERS live readers. */
export class TooManyReaders extends refusal(RetryLaterError, "too_many_readers", [503]) {}

/** 502: the gateway's upstream MCP server is unreachable or failed before answering. */
export class UpstreamUnavailable extends refusal(RetryLaterError, "upstream_unavailable", [502]) {}

/** 503: readiness: the gateway's upstream MCP server does not answer. */
export class UpstreamUnreachable extends refusal(RetryLaterError, "upstream_unreachable", [503]) {}

/**
 * This writer may no longer write the generation or task: it was superseded, finished or
 * abandoned. Stop writing it; open a new generation if there is more to say.
 */
export class FencedError extends ServiceRefusal {}

/** 409: the writer's lease ran out and the generation was abandoned (fenced). */
export class Abandoned extends refusal(FencedError, "abandoned", [409]) {}

/** 409: a newer generation of the stream fenced this one. */
export class Superseded extends refusal(FencedError, "superseded", [409]) {}

/** 409: the generation is finished; nothing more is appended. */
export class TerminalGeneration extends refusal(FencedError, "terminal", [409]) {}

/**
 * The request itself is wrong (its body, media type, method, a value or an id): fix it; sent again
 * unchanged it fails the same way.
 */
export class InvalidRequestError extends ServiceRefusal {}

/** 409: a stream id several tenants use, asked about without saying which tenant. */
export class AmbiguousStream extends refusal(InvalidRequestError, "ambiguous_stream", [409]) {}

/** 400: the framework could not read the request. */
export class BadRequest extends refusal(InvalidRequestError, "bad_request", [400]) {}

/** 422: the body is not strict UTF-8 JSON (or has a key twice). */
export class InvalidJson extends refusal(InvalidRequestError, "invalid_json", [422]) {}

/** 400: a live read's claim is not <token>:<seq>. */
export class MalformedId extends refusal(InvalidRequestError, "malformed_id", [400]) {}

/** 405: the route does not answer this method. */
export class MethodNotAllowed extends refusal(InvalidRequestError, "method_not_allowed", [405]) {}

/** 406: the client accepts none of the route's media types. */
export class NotAcceptable extends refusal(InvalidRequestError, "not_acceptable", [406]) {}

/** 422: an event's type is a control event name of live reads (reset, end). */
export class ReservedEventType extends refusal(InvalidRequestError, "reserved_event_type", [422]) {}

/** 415: the body is not declared as JSON, or is encoded. */
export class UnsupportedMediaType extends refusal(
  InvalidRequestError,
  "unsupported_media_type",
  [415],
) {}

/** 422: the request does not match the schema, or breaks a rule of the contract. */
export class ValidationFailed extends refusal(InvalidRequestError, "validation_error", [422]) {}

/**
 * The key, its scope, the `Host` or the `Origin` is not accepted: fix the caller's configuration,
 * not the request.
 */
export class AccessDeniedError extends ServiceRefusal {}

/** 403: the key lacks the scope the route needs. */
export class Forbidden extends refusal(AccessDeniedError, "forbidden", [403]) {}

/** 421: the Host is not one the service answers as. */
export class HostNotAllowed extends refusal(AccessDeniedError, "host_not_allowed", [421]) {}

/** 403: a browser page of an origin not accepted. */
export class OriginNotAllowed extends refusal(AccessDeniedError, "origin_not_allowed", [403]) {}

/** 401: no key, or a key the service does not know. */
export class Unauthorized extends refusal(AccessDeniedError, "unauthorized", [401]) {}

/**
 * The service failed on its side (a defect, a database error): nothing was stored; its log says
 * why, and a retry may fail the same way.
 */
export class ServiceFaultError extends ServiceRefusal {}

/** 500: an unexpected error of the service (its log has it). */
export class InternalError extends refusal(ServiceFaultError, "internal_error", [500]) {}

/** 500: the database failed; nothing was stored. */
export class StorageFailed extends refusal(ServiceFaultError, "storage_error", [500]) {}

/** Each group of the service's table, by its name, with its class. */
export const GROUPS: ReadonlyMap<string, Group> = new Map<string, Group>([
  ["conflict", ConflictError],
  ["not_found", NotFoundError],
  ["gone", GoneError],
  ["too_large", TooLargeError],
  ["retry_later", RetryLaterError],
  ["fenced", FencedError],
  ["invalid_request", InvalidRequestError],
  ["access_denied", AccessDeniedError],
  ["service_fault", ServiceFaultError],
]);

/** Every problem code of the service's table, with its class. */
export const REFUSALS: ReadonlyMap<string, RefusalClass> = new Map<string, RefusalClass>([
  ["beyond_tail", BeyondTail],
  ["cross_session", CrossSession],
  ["cross_stream", CrossStream],
  ["invalid_transition", InvalidTransition],
  ["seq_conflict", SeqConflict],
  ["seq_gap", SeqGap],
  ["unknown_attempt", UnknownAttempt],
  ["not_found", NotFound],
  ["unknown_generation", UnknownGeneration],
  ["unknown_stream", UnknownStream],
  ["unknown_task", UnknownTask],
  ["evicted", Evicted],
  ["expired", Expired],
  ["batch_too_large", BatchTooLarge],
  ["body_too_large", BodyTooLarge],
  ["event_too_large", EventTooLarge],
  ["headers_too_large", HeadersTooLarge],
  ["background_task_down", BackgroundTaskDown],
  ["body_timeout", BodyTimeout],
  ["database_unavailable", DatabaseUnavailable],
  ["header_timeout", HeaderTimeout],
  ["overloaded", Overloaded],
  ["schema_not_current", SchemaNotCurrent],
  ["too_many_connections", TooManyConnections],
  ["too_many_pages", TooManyPages],
  ["too_many_readers", TooManyReaders],
  ["upstream_unavailable", UpstreamUnavailable],
  ["upstream_unreachable", UpstreamUnreachable],
  ["abandoned", Abandoned],
  ["superseded", Superseded],
  ["terminal", TerminalGeneration],
  ["ambiguous_stream", AmbiguousStream],
  ["bad_request", BadRequest],
  ["invalid_json", InvalidJson],
  ["malformed_id", MalformedId],
  ["method_not_allowed", MethodNotAllowed],
  ["not_acceptable", NotAcceptable],
  ["reserved_event_type", ReservedEventType],
  ["unsupported_media_type", UnsupportedMediaType],
  ["validation_error", ValidationFailed],
  ["forbidden", Forbidden],
  ["host_not_allowed", HostNotAllowed],
  ["origin_not_allowed", OriginNotAllowed],
  ["unauthorized", Unauthorized],
  ["internal_error", InternalError],
  ["storage_error", StorageFailed],
]);
