/**
 * One connection to the service: base URL, key, the platform's `fetch`, bounded retries.
 *
 * Every call of `EventLogClient` goes through a `ServiceConnection`, so there is one way to
 * authenticate, one timeout rule and one rule for what may be retried. Connections are pooled
 * and kept alive by the platform's `fetch` (undici in Node), so a connection object is cheap.
 *
 * The answer is not trusted to come from the service: one deadline covers each attempt,
 * body included (a drip is cut); a body is read up to `maxResponseBytes` decoded bytes (a huge
 * body or a gzip bomb is cut); a 2xx must be JSON by its `Content-Type` and by its bytes; a
 * redirect is never followed (it would carry the request, event data and key included, to
 * wherever it points, and take that host's answer for the service's). Each of these is an
 * `InvalidResponse`, never retried.
 */

import { type BodyText, ERROR_BODY_BYTES, NotUtf8, readBody } from "./body.js";
import {
  DeadlineExceeded,
  errorFromBody,
  EventLogError,
  InvalidResponse,
  isJsonMediaType,
  MalformedResponse,
  Redirected,
  ResponseTooLarge,
  ServiceUnreachable,
  UnexpectedContentType,
} from "./errors.js";

/** Where the service is when neither an option nor `EVENTLOG_URL` says. */
export const DEFAULT_URL = "http://127.0.0.1:8080";

/** The default cap on an answer's decoded body. */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1_048_576;

/**
 * How often, and how patiently, a request that is safe to repeat is sent again.
 *
 * `attempts` counts every try (1 means never retry). The delay before retry `n` (0-based) is
 * `baseDelayMs * 2**n` with +-25 % jitter, capped at `maxDelayMs`; a `Retry-After` from the
 * service is honoured up to the same cap.
 */
export interface RetryPolicy {
  readonly attempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

/** Four tries, 50 ms doubling, at most 1 s apart: the Python client's policy. */
export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, baseDelayMs: 50, maxDelayMs: 1000 };

/** Milliseconds to wait before retry number `retry` (0-based). */
export function retryDelayMs(policy: RetryPolicy, retry: number, retryAfterMs?: number): number {
  if (retryAfterMs !== undefined) return Math.min(retryAfterMs, policy.maxDelayMs);
  const backoff = policy.baseDelayMs * 2 ** retry;
  // Jitter spreads out writers that failed together, so they do not retry in lockstep.
  return Math.min(backoff * (0.75 + Math.random() * 0.5), policy.maxDelayMs);
}

/** How to reach the service. Every field is optional. */
export interface ConnectionOptions {
  /** The service's base URL; default `EVENTLOG_URL`, else `http://127.0.0.1:8080`. */
  readonly baseUrl?: string;
  /** A bearer key (`Authorization: Bearer <key>`); default `EVENTLOG_KEY`, else none. */
  readonly key?: string;
  /** Milliseconds one attempt may take, answer body included; default 10 000. */
  readonly timeoutMs?: number;
  /** The most decoded bytes of an answer's body that are read; default 64 MiB (a page holds at
   *  most `EVENTLOG_MAX_PAGE_BYTES`, 4 MiB, of data, at most 6x that once JSON-escaped). */
  readonly maxResponseBytes?: number;
  /** What is retried, how often; default `DEFAULT_RETRY`. */
  readonly retry?: RetryPolicy;
  /** The `fetch` to use; default the platform's. */
  readonly fetch?: typeof fetch;
}

/** Options of a client of one of the service's APIs (`EventLogClient`, `TaskClient`): how to
 *  reach the service, or a shared connection. */
export interface ClientOptions extends ConnectionOptions {
  /** Share one connection (base URL, key, retry policy) between clients. */
  readonly connection?: ServiceConnection;
}

/** One request to send. */
export interface ServiceRequest {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly json?: unknown;
  readonly params?: Readonly<Record<string, string | number>>;
  /** Whether the request may be repeated: only for idempotent requests. */
  readonly retry: boolean;
  /** Aborts the request (and its retries) with the signal's reason. */
  readonly signal?: AbortSignal | undefined;
  /** A long-poll: the service may hold its answer up to this many seconds (sent as the
   *  `wait` parameter), so each attempt's deadline is the connection's plus the wait. */
  readonly wait?: number | undefined;
}

function environment(name: string): string | undefined {
  const host = globalThis as { process?: { env?: Record<string, string | undefined> } };
  const value = host.process?.env?.[name];
  return value === "" ? undefined : value;
}

/** Sends requests to the service and turns refusals into `EventLogError`s. */
export class ServiceConnection {
  readonly baseUrl: string;
  readonly retry: RetryPolicy;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  /** The bearer key, if any (the append channel authenticates with it too). */
  readonly key: string | undefined;
  private readonly headers: Readonly<Record<string, string>>;
  private readonly fetch: typeof fetch;

  constructor(options: ConnectionOptions = {}) {
    const url = options.baseUrl ?? environment("EVENTLOG_URL") ?? DEFAULT_URL;
    this.baseUrl = url.replace(/\/+$/, "");
    const key = options.key ?? environment("EVENTLOG_KEY");
    this.key = key;
    this.headers = key ? { authorization: `Bearer ${key}` } : {};
    this.retry = options.retry ?? DEFAULT_RETRY;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /**
   * Send one request and return its JSON body; throw an `EventLogError` on refusal.
   *
   * With `retry`, a transport error or a 5xx answer is retried under the policy. Only callers
   * whose request is idempotent may pass `retry: true`: the request may have been processed
   * even though no answer arrived. An answer that is not the service's (`InvalidResponse`) is
   * never retried. An abort of `signal` stops at once with its reason.
   */
  async request(request: ServiceRequest): Promise<unknown> {
    const attempts = request.retry ? Math.max(1, this.retry.attempts) : 1;
    for (let attempt = 0; ; attempt += 1) {
      const last = attempt + 1 >= attempts;
      const outcome = await this.attempt(request);
      if (outcome.kind === "answer") return outcome.body;
      if (outcome.kind === "invalid") throw outcome.error;
      if (outcome.kind === "refused" && (outcome.error.status < 500 || last)) throw outcome.error;
      if (outcome.kind === "unreachable" && last)
        throw unreachable(outcome.cause, outcome.timedOut);
      const retryAfter = outcome.kind === "refused" ? outcome.retryAfterMs : undefined;
      await sleep(retryDelayMs(this.retry, attempt, retryAfter), request.signal);
    }
  }

  private async attempt(request: ServiceRequest): Promise<Outcome> {
    // One deadline for the whole attempt, answer body included: a service that drips its
    // answer a byte at a time is cut like one that never answers.
    const waitMs = request.wait === undefined ? 0 : request.wait * 1000;
    const timeout = AbortSignal.timeout(this.timeoutMs + waitMs);
    const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
    const headers: Record<string, string> = { ...this.headers, accept: "application/json" };
    let body: string | undefined;
    if (request.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(request.json);
    }
    let response: Response | undefined;
    let text: BodyText;
    try {
      const init: RequestInit = { method: request.method, headers, signal, redirect: "manual" };
      if (body !== undefined) init.body = body;
      response = await this.fetch(this.url(request), init);
      const refusal = unacceptable(response);
      if (refusal !== undefined) {
        await response.body?.cancel().catch(() => undefined);
        return { kind: "invalid", error: refusal };
      }
      const ok = response.status >= 200 && response.status < 300;
      text = await readBody(response, ok ? this.maxResponseBytes : ERROR_BODY_BYTES);
    } catch (error) {
      // The caller's own abort is not the service's fault: never retried, never "unreachable".
      if (request.signal?.aborted) throw request.signal.reason;
      if (error instanceof NotUtf8) {
        return { kind: "invalid", error: malformed(response?.status ?? 0, error.message) };
      }
      return { kind: "unreachable", cause: error, timedOut: timeout.aborted };
    }
    const { status, statusText } = response;
    if (status >= 200 && status < 300) {
      if (!text.complete) {
        const detail = `the answer is over ${this.maxResponseBytes} bytes`;
        return {
          kind: "invalid",
          error: new ResponseTooLarge(status, ResponseTooLarge.code, detail),
        };
      }
      return parseJson(status, text.text);
    }
    return {
      kind: "refused",
      error: errorFromBody(status, statusText, text.text, response.headers.get("content-type")),
      retryAfterMs: retryAfterMs(response.headers.get("retry-after")),
    };
  }

  /**
   * Open a `text/event-stream` answer (a live read) and return it, its body unread: the
   * caller reads it, bounded (`sse.ts`). `signal` governs the whole exchange; the caller
   * aborts it to end the stream. Never retried. A refusal throws its `EventLogError`; a
   * redirect, or a 2xx that is not an event stream, throws `InvalidResponse`; no answer
   * throws `ServiceUnreachable`.
   */
  async openStream(
    path: string,
    headers: Readonly<Record<string, string>>,
    signal: AbortSignal,
  ): Promise<Response> {
    let response: Response;
    const init: RequestInit = {
      method: "GET",
      headers: { ...this.headers, accept: "text/event-stream", ...headers },
      signal,
      redirect: "manual",
    };
    try {
      response = await this.fetch(this.baseUrl + path, init);
    } catch (error) {
      if (signal.aborted && signal.reason instanceof EventLogError) throw signal.reason;
      throw unreachable(error, false);
    }
    const { status } = response;
    const type = response.headers.get("content-type") ?? "";
    const redirect = status >= 300 && status < 400;
    const streaming = type.split(";", 1)[0]?.trim().toLowerCase() === "text/event-stream";
    if (status >= 200 && status < 300 && streaming) return response;
    if (redirect || (status >= 200 && status < 300)) {
      await response.body?.cancel().catch(() => undefined);
      const why = `the answer is ${type || "untyped"}, not an event stream: is the service's URL right?`;
      throw (
        (redirect ? unacceptable(response) : undefined) ??
        new UnexpectedContentType(status, UnexpectedContentType.code, why)
      );
    }
    let text: BodyText;
    try {
      text = await readBody(response, ERROR_BODY_BYTES);
    } catch (error) {
      if (signal.aborted && signal.reason instanceof EventLogError) throw signal.reason;
      throw unreachable(error, false);
    }
    throw errorFromBody(status, response.statusText, text.text, type);
  }

  private url(request: ServiceRequest): string {
    const url = this.baseUrl + request.path;
    const params = { ...request.params };
    if (request.wait !== undefined) params["wait"] = request.wait;
    if (Object.keys(params).length === 0) return url;
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params)) query.set(name, String(value));
    return `${url}?${query.toString()}`;
  }
}

/**
 * A client of one of the service's APIs (`EventLogClient`, `TaskClient`): its connection, made
 * from the options, or the one given to share.
 */
export class ServiceClient {
  readonly connection: ServiceConnection;

  constructor(options: ClientOptions = {}) {
    this.connection = options.connection ?? new ServiceConnection(options);
  }
}

type Outcome =
  | { readonly kind: "answer"; readonly body: unknown }
  | { readonly kind: "invalid"; readonly error: InvalidResponse }
  | {
      readonly kind: "refused";
      readonly error: EventLogError;
      readonly retryAfterMs?: number | undefined;
    }
  | { readonly kind: "unreachable"; readonly cause: unknown; readonly timedOut: boolean };

/** Why an answer is not the service's before its body is read: a redirect, or a 2xx that
 *  does not say it is JSON. Undefined when the body may be read. */
function unacceptable(response: Response): InvalidResponse | undefined {
  const { status } = response;
  if (status >= 300 && status < 400) {
    const location = response.headers.get("location") ?? "nowhere";
    return new Redirected(
      status,
      Redirected.code,
      `the answer is a redirect (${status} to ${location.slice(0, 200)}); redirects are never ` +
        "followed: is the service's URL right?",
    );
  }
  const type = response.headers.get("content-type");
  if (status >= 200 && status < 300 && !isJsonMediaType(type)) {
    const detail = `the answer is ${type ?? "untyped"}, not JSON: is the service's URL right?`;
    return new UnexpectedContentType(status, UnexpectedContentType.code, detail);
  }
  return undefined;
}

function malformed(status: number, detail: string): MalformedResponse {
  return new MalformedResponse(status, MalformedResponse.code, detail);
}

function parseJson(status: number, text: string): Outcome {
  try {
    return { kind: "answer", body: JSON.parse(text) };
  } catch {
    return {
      kind: "invalid",
      error: malformed(status, `the answer is not JSON: ${text.slice(0, 200)}`),
    };
  }
}

/** No answer: `DeadlineExceeded` when the attempt's deadline ran out, else unreachable. */
function unreachable(cause: unknown, timedOut: boolean): ServiceUnreachable {
  const detail = describe(cause);
  return timedOut
    ? new DeadlineExceeded(0, DeadlineExceeded.code, detail, { cause })
    : new ServiceUnreachable(0, ServiceUnreachable.code, detail, { cause });
}

function retryAfterMs(value: string | null): number | undefined {
  if (value === null) return undefined;
  const seconds = Number(value);
  // An HTTP date is rare from this service: fall back to the backoff.
  return Number.isFinite(seconds) && value.trim() !== "" ? Math.max(seconds, 0) * 1000 : undefined;
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.name}: ${error.message}${cause}`;
}

/** Wait `ms`, or reject with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
