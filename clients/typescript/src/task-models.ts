/**
 * A task of the task API as the client reads it (`tasks.ts` calls the API): the task, its
 * appends and pages of events, each read from the contract's JSON and refused as
 * `MalformedResponse` when a field is missing or of the wrong type; and the task as MCP's tasks
 * extension shows it.
 */

import { isRecord, MalformedResponse } from "./errors.js";
import { type EventPage, Fields, pageFields } from "./models.js";

export type TaskStatus = "working" | "input_required" | "completed" | "failed" | "cancelled";
export const TERMINAL_STATUSES: ReadonlySet<TaskStatus> = new Set([
  "completed",
  "failed",
  "cancelled",
]);
const STATUSES: ReadonlySet<string> = new Set([...TERMINAL_STATUSES, "working", "input_required"]);

/** A JSON object. */
export type JsonObject = Record<string, unknown>;

/**
 * A task as the service answers it. `result` is set when `completed` (the tool's
 * `CallToolResult`, a tool error included), `error` when `failed` (a JSON-RPC error object;
 * `error.data.reason === "worker_lost"` when its worker's lease ran out), `inputRequests`
 * and `inputResponses` (the answers so far in this round) when `input_required`.
 */
export interface Task {
  readonly taskId: string;
  readonly status: TaskStatus;
  readonly statusMessage: string | null;
  readonly createdAt: string;
  readonly lastUpdatedAt: string;
  readonly ttlMs: number;
  readonly pollIntervalMs: number;
  /** The fencing token of the one worker allowed to write the task. */
  readonly attempt: number;
  readonly generation: string;
  readonly leaseExpiresAt: string | null;
  readonly cancelRequested: boolean;
  readonly result: JsonObject | null;
  readonly error: JsonObject | null;
  readonly inputRequests: JsonObject | null;
  readonly inputResponses: JsonObject | null;
}

/** The task after the requester's answers, and the keys it took. */
export interface InputAnswer {
  readonly task: Task;
  readonly accepted: readonly string[];
}

/** The ids of a task's appended progress events, and the worker's lease after it. */
export interface TaskAppend {
  readonly taskId: string;
  readonly attempt: number;
  readonly generation: string;
  readonly eventIds: readonly string[];
  readonly tailSeq: number;
  readonly duplicate: boolean;
  readonly leaseExpiresAt: string | null;
}

/**
 * A page of the current attempt's events. A reader that sees `attempt` change (or
 * `superseded`) discards what it read and starts over at `after: 0`: never splice two runs.
 */
export interface TaskEventsPage extends EventPage {
  readonly taskId: string;
  readonly attempt: number;
  readonly superseded: boolean;
}

/** Whether the task settled (`completed`, `failed`, `cancelled`): it never changes again. */
export function isTerminal(task: Task): boolean {
  return TERMINAL_STATUSES.has(task.status);
}

/** Whether the task failed because its worker stopped renewing its lease. */
export function isWorkerLost(task: Task): boolean {
  const data = task.error?.["data"];
  return isRecord(data) && data["reason"] === "worker_lost";
}

/**
 * The task as MCP's tasks extension shows it (SEP-2663 `DetailedTask`): what `tasks/get`
 * answers and `CreateTaskResult` carries (add its `resultType`). An `input_required` task
 * shows only its outstanding requests (an answered key is not asked again).
 */
export function toMcpTask(task: Task): JsonObject {
  const shown: JsonObject = {
    taskId: task.taskId,
    status: task.status,
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttlMs: task.ttlMs,
    pollIntervalMs: task.pollIntervalMs,
  };
  if (task.statusMessage !== null) shown["statusMessage"] = task.statusMessage;
  if (task.status === "completed" && task.result !== null) shown["result"] = task.result;
  if (task.status === "failed" && task.error !== null) shown["error"] = task.error;
  if (task.status === "input_required") {
    const answered = task.inputResponses ?? {};
    shown["inputRequests"] = Object.fromEntries(
      Object.entries(task.inputRequests ?? {}).filter(([key]) => !(key in answered)),
    );
  }
  return shown;
}

function invalid(what: string, why: string): MalformedResponse {
  return new MalformedResponse(200, MalformedResponse.code, `the ${what} ${why}`);
}

/** Read a task object of the contract. */
export function parseTask(body: unknown): Task {
  const r = new Fields(body, "task");
  const status = r.str("status");
  if (!STATUSES.has(status)) throw invalid("task", `has an unknown status "${status}"`);
  return {
    taskId: r.str("task_id"),
    status: status as TaskStatus,
    statusMessage: r.optStr("status_message"),
    createdAt: r.str("created_at"),
    lastUpdatedAt: r.str("last_updated_at"),
    ttlMs: r.int("ttl_ms"),
    pollIntervalMs: r.int("poll_interval_ms"),
    attempt: r.int("attempt"),
    generation: r.str("generation"),
    leaseExpiresAt: r.optStr("lease_expires_at"),
    cancelRequested: r.bool("cancel_requested"),
    result: r.optObject("result"),
    error: r.optObject("error"),
    inputRequests: r.optObject("input_requests"),
    inputResponses: r.optObject("input_responses"),
  };
}

export function parseInputAnswer(body: unknown): InputAnswer {
  const r = new Fields(body, "input answer");
  const accepted = r.list("accepted").map((key) => {
    if (typeof key !== "string") throw invalid("input answer", "has a key that is not a string");
    return key;
  });
  return { task: parseTask(body), accepted };
}

export function parseTaskAppend(body: unknown): TaskAppend {
  const r = new Fields(body, "task append answer");
  return {
    taskId: r.str("task_id"),
    attempt: r.int("attempt"),
    generation: r.str("generation"),
    eventIds: r.eventIds("event_ids"),
    tailSeq: r.int("tail_seq"),
    duplicate: r.bool("duplicate"),
    leaseExpiresAt: r.optStr("lease_expires_at"),
  };
}

export function parseTaskEventsPage(body: unknown): TaskEventsPage {
  const r = new Fields(body, "task events page");
  return {
    taskId: r.str("task_id"),
    attempt: r.int("attempt"),
    ...pageFields(r),
    superseded: r.bool("superseded", false),
  };
}
