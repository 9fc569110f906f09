/**
 * The client's one error tree: every failure of a call is an `EventLogError`.
 *
 * ```
 * EventLogError                 status, code, detail (programs match on the class or `.code`)
 * ├── ServiceRefusal            the service answered a problem (RFC 9457) with a stable `code`
 * │   ├── ConflictError         contradicts what is stored: read the state again
 * │   ├── NotFoundError         nothing has that id: check the id
 * │   ├── GoneError             no longer kept (evicted, expired): start over from what is
 * │   ├── TooLargeError         over a size limit: send less at once
 * │   ├── RetryLaterError       cannot take it now, nothing stored: retry after a while
 * │   ├── FencedError           this writer may no longer write it: stop, open a new one
 * │   ├── InvalidRequestError   the request itself is wrong: fix it
 * │   ├── AccessDeniedError     key, scope, Host or Origin refused: fix the configuration
 * │   ├── ServiceFaultError     the service failed on its side: report it
 * │   │   (under each group, one class per code of it: Superseded, SeqGap, …, in codes.ts)
 * │   └── (a code this client does not know yet is a bare `ServiceRefusal`)
 * ├── HttpError                 a non-2xx answer without a problem body (a proxy's error page)
 * ├── ServiceUnreachable        no answer: connection refused or broken (status 0)
 * │   ├── DeadlineExceeded      no whole answer within the attempt's deadline (status 0)
 * │   └── ChannelUnavailable    the append channel cannot carry it: sent over REST instead
 * └── InvalidResponse           an answer this client will not act on (status: the answer's)
 *     ├── Redirected            a 3xx: never followed (the event data would go to another host)
 *     ├── UnexpectedContentType not the media type the route answers with (HTML from a proxy)
 *     ├── ResponseTooLarge      the decoded body (or one SSE line or frame) is over the cap
 *     └── MalformedResponse     not JSON or UTF-8, a field missing or of the wrong type, a
 *                               broken SSE frame
 * ```
 *
 * Catch by group for what to do next (`err instanceof RetryLaterError`), by class or `.code`
 * for one case. The tree, the codes and their groups are the Python client's (`errors.py`; its
 * `UntrustedResponse` is `InvalidResponse` here). The groups and the code classes are written
 * by `make codes` from the service's own table (`app/api/problem_table.py`) into `codes.ts`;
 * a test fails when it drifts. A newer service never breaks an older client: an unknown code is
 * a bare `ServiceRefusal`.
 */

import { REFUSALS } from "./codes.js";
import { EventLogError, type RefusalClass, ServiceRefusal } from "./error-base.js";

export * from "./codes.js";
export { EventLogError, type RefusalClass, ServiceRefusal } from "./error-base.js";

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

/** Every problem code this client knows, with its class. */
export function refusalClasses(): ReadonlyMap<string, RefusalClass> {
  return REFUSALS;
}

/** The error for a problem `code`; a bare `ServiceRefusal` for a code this client lacks. */
export function errorFor(status: number, code: string, detail: string): ServiceRefusal {
  const cls = REFUSALS.get(code) ?? ServiceRefusal;
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

/** Whether a `Content-Type` names JSON (`application/json`, or any `+json` type). */
export function isJsonMediaType(contentType: string | null): boolean {
  const essence = (contentType ?? "").split(";", 1)[0]?.trim().toLowerCase() ?? "";
  return (
    essence === "application/json" ||
    (essence.startsWith("application/") && essence.endsWith("+json"))
  );
}
