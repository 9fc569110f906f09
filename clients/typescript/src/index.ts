/**
 * mcp-eventlog: a typed client for the event-log service, and an `EventStore` for the MCP
 * TypeScript SDK (1.x and 2.x) that stores a session's SSE events in it and resumes only
 * safely.
 *
 * `mcp-eventlog/client` is the client alone, without the store (and without the SDK's types).
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

export * from "./writer.js";
export { DEFAULT_LEASE_SECONDS, LeaseKeeper } from "./lease.js";
export { GenerationPipeline, type PipelineOptions } from "./pipeline.js";
export { InvalidTransition, UnknownAttempt, UnknownTask } from "./errors.js";
export * from "./tasks.js";
export * from "./task-runner.js";
export * from "./mcp-tasks.js";
export { EventLogTaskStoreV1, type TaskV1 } from "./task-store-v1.js";
export {
  MESSAGE_EVENT,
  PART_EVENT,
  partOf,
  PRIMING_EVENT,
  splitMessage,
  Unjoinable,
} from "./encoding.js";
export { type Refusal, refusalMessage, RESUME_REFUSED, ResumeRefused } from "./refusal.js";
export { newStoreStats, type StoreLogger, type StoreStats } from "./reporting.js";
export type {
  EventId,
  McpEventStore,
  McpMessage,
  McpServerEventBus,
  RequestId,
  SendEvent,
  ServerEvent,
  StreamId,
} from "./sdk.js";
export {
  type BusStats,
  EventLogServerEventBus,
  type EventLogServerEventBusOptions,
} from "./bus.js";
export {
  BUS_EVENT_TYPE,
  BUS_STREAM_PREFIX,
  busStreamId,
  decodeServerEvent,
  encodeServerEvent,
} from "./bus-convention.js";
export {
  type AppendTransport,
  DEFAULT_PIPELINE,
  defaultAppendTransport,
  type Durability,
  EventLogEventStore,
  type EventLogEventStoreOptions,
  GET_STREAM,
  UNSTORED_PREFIX,
} from "./store.js";
