/**
 * The client alone: `import { EventLogClient } from "mcp-eventlog/client"` needs neither the MCP
 * SDK nor its types (the package's main entry adds the store, whose types come from the SDK).
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
export type { FollowOptions, LiveEvent } from "./live.js";
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
