/**
 * mcp-eventlog: a typed client for the event-log service, and an `EventStore` for the MCP
 * TypeScript SDK that stores a session's SSE events in it and resumes only safely.
 *
 * ```ts
 * import { EventLogClient } from "mcp-eventlog";
 *
 * const log = new EventLogClient({ baseUrl: "http://127.0.0.1:8080" });
 * const generation = await log.openGeneration("sess-1.req-7");
 * await log.append(generation.token, [{ data: "hello" }], { firstSeq: 1 });
 * const answer = await log.resume(`${generation.token}:0`);
 * ```
 */

export {
  type AppendOptions,
  type CallOptions,
  EventLogClient,
  type EventLogClientOptions,
  type OpenOptions,
  type PageOptions,
  type ResumeOptions,
} from "./client.js";
export {
  type ConnectionOptions,
  DEFAULT_RETRY,
  DEFAULT_URL,
  type RetryPolicy,
  retryDelayMs,
  ServiceConnection,
  type ServiceRequest,
} from "./connection.js";
export { MESSAGE_EVENT, PART_EVENT, PRIMING_EVENT } from "./encoding.js";
export {
  BatchTooLarge,
  BeyondTail,
  BodyTimeout,
  BodyTooLarge,
  DatabaseUnavailable,
  errorFor,
  EventLogError,
  EventTooLarge,
  Evicted,
  Expired,
  Forbidden,
  InternalError,
  InvalidJson,
  InvalidResponse,
  NotFound,
  SeqConflict,
  SeqGap,
  ServiceUnreachable,
  StorageFailed,
  Superseded,
  TerminalGeneration,
  Unauthorized,
  UnknownGeneration,
  UnknownStream,
  UnsupportedMediaType,
  ValidationFailed,
} from "./errors.js";
export type {
  AppendResult,
  EventPage,
  Generation,
  GenerationReason,
  NewEvent,
  ResumeAnswer,
  StoredEvent,
  StreamView,
  Verdict,
} from "./models.js";
export {
  escapeSdkStream,
  MAX_STREAM_ID,
  type ParsedName,
  StreamNames,
  unescapeSdkStream,
} from "./names.js";
export { type Refusal, refusalMessage, RESUME_REFUSED, ResumeRefused } from "./refusal.js";
export { newStoreStats, type StoreLogger, type StoreStats } from "./reporting.js";
export {
  EventLogEventStore,
  type EventLogEventStoreOptions,
  GET_STREAM,
  UNSTORED_PREFIX,
} from "./store.js";
