/**
 * The task API as typed async calls: the record of MCP's tasks extension, kept in the log.
 *
 * ```ts
 * import { TaskClient } from "mcp-eventlog/tasks";
 *
 * const tasks = new TaskClient({ baseUrl: "http://127.0.0.1:8080" });
 * const task = await tasks.create({ principal: "alice", ttlMs: 600_000 }); // durable once answered
 * await tasks.append(task.taskId, task.attempt, [{ event: "progress", data: '{"progress":50}' }]);
 * await tasks.setStatus(task.taskId, task.attempt, "completed", { result: { content: [] } });
 * const seen = await tasks.get(task.taskId, { principal: "alice" }); // from any replica
 * ```
 *
 * Two parties call it (docs/tasks.md): the requester (`get`, `answer`, `cancel`, `events`,
 * `follow`; bound to the task's `principal`) and the worker (`setStatus`, `renew`, `append`,
 * `takeOver`; fenced by its `attempt`). Refusals throw the client's error classes by code:
 * `UnknownTask` (unknown, expired and another principal's task alike), `Superseded`,
 * `TerminalGeneration` (the task settled: how a worker learns of a cancel), `UnknownAttempt`,
 * `InvalidTransition`, `ValidationFailed`, `Evicted`, `BeyondTail`.
 *
 * Retried is only what is safe to repeat: reads, lease renewals, cancels, answers (the first
 * answer to a key stands) and appends with `firstSeq`. Creating a task, taking one over and
 * changing its status are sent once.
 */

import type { CallOptions } from "./client.js";
import { type ConnectionOptions, ServiceConnection } from "./connection.js";
import { isRecord, MalformedResponse } from "./errors.js";
import { followPath, type FollowOptions, type LiveEvent } from "./live.js";
import { type NewEvent, parseStoredEvent, type StoredEvent } from "./models.js";

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
export interface TaskEventsPage {
  readonly taskId: string;
  readonly attempt: number;
  readonly generation: string;
  readonly events: readonly StoredEvent[];
  readonly nextAfter: number | null;
  readonly headSeq: number;
  readonly tailSeq: number;
  readonly terminal: boolean;
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

class Reader {
  private readonly body: Record<string, unknown>;

  constructor(
    body: unknown,
    private readonly what: string,
  ) {
    if (!isRecord(body)) throw invalid(what, "is not an object");
    this.body = body;
  }

  str(name: string): string {
    const value = this.body[name];
    if (typeof value !== "string") throw invalid(this.what, `has no string "${name}"`);
    return value;
  }

  int(name: string): number {
    const value = this.body[name];
    if (typeof value !== "number" || !Number.isInteger(value)) {
      throw invalid(this.what, `has no integer "${name}"`);
    }
    return value;
  }

  bool(name: string, fallback?: boolean): boolean {
    const value = this.body[name] ?? fallback;
    if (typeof value !== "boolean") throw invalid(this.what, `has no boolean "${name}"`);
    return value;
  }

  optStr(name: string): string | null {
    const value = this.body[name];
    return value === undefined || value === null ? null : this.str(name);
  }

  optInt(name: string): number | null {
    const value = this.body[name];
    return value === undefined || value === null ? null : this.int(name);
  }

  optObject(name: string): JsonObject | null {
    const value = this.body[name];
    if (value === undefined || value === null) return null;
    if (!isRecord(value)) throw invalid(this.what, `has a "${name}" that is not an object`);
    return value;
  }

  list(name: string): readonly unknown[] {
    const value = this.body[name];
    if (!Array.isArray(value)) throw invalid(this.what, `has no list "${name}"`);
    return value;
  }
}

/** Read a task object of the contract. */
export function parseTask(body: unknown): Task {
  const r = new Reader(body, "task");
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

function parseInputAnswer(body: unknown): InputAnswer {
  const r = new Reader(body, "input answer");
  const accepted = r.list("accepted").map((key) => {
    if (typeof key !== "string") throw invalid("input answer", "has a key that is not a string");
    return key;
  });
  return { task: parseTask(body), accepted };
}

function parseTaskAppend(body: unknown): TaskAppend {
  const r = new Reader(body, "task append answer");
  return {
    taskId: r.str("task_id"),
    attempt: r.int("attempt"),
    generation: r.str("generation"),
    eventIds: r.list("event_ids").map((id) => {
      if (typeof id !== "string") throw invalid("task append answer", "has a bad event id");
      return id;
    }),
    tailSeq: r.int("tail_seq"),
    duplicate: r.bool("duplicate"),
    leaseExpiresAt: r.optStr("lease_expires_at"),
  };
}

function parseTaskEventsPage(body: unknown): TaskEventsPage {
  const r = new Reader(body, "task events page");
  return {
    taskId: r.str("task_id"),
    attempt: r.int("attempt"),
    generation: r.str("generation"),
    events: r.list("events").map(parseStoredEvent),
    nextAfter: r.optInt("next_after"),
    headSeq: r.int("head_seq"),
    tailSeq: r.int("tail_seq"),
    terminal: r.bool("terminal"),
    superseded: r.bool("superseded", false),
  };
}

/** What a task is created with (all optional). */
export interface CreateTaskOptions extends CallOptions {
  /** Who may read it (the requester's identity); none: whoever holds the id. */
  readonly principal?: string | undefined;
  readonly ttlMs?: number | undefined;
  readonly pollIntervalMs?: number | undefined;
  /** What was asked (kept with the task, shown to operators). */
  readonly request?: JsonObject | undefined;
  /** The worker lease (default the service's `EVENTLOG_WRITER_LEASE_SECONDS`). */
  readonly leaseSeconds?: number | undefined;
  readonly producer?: string | undefined;
}

/** A requester's call: the principal the task is bound to. */
export interface RequesterOptions extends CallOptions {
  readonly principal?: string | undefined;
}

/** What a status change carries. */
export interface StatusOptions extends CallOptions {
  readonly statusMessage?: string | undefined;
  readonly result?: JsonObject | undefined;
  readonly error?: JsonObject | undefined;
  readonly inputRequests?: JsonObject | undefined;
}

/** Which of the current attempt's events a page holds. */
export interface TaskEventsOptions extends RequesterOptions {
  readonly after?: number | undefined;
  readonly limit?: number | undefined;
  /** Seconds to wait for an event when there is none yet (a long-poll). */
  readonly wait?: number | undefined;
}

/** Options of `TaskClient`: how to reach the service, or a shared connection. */
export interface TaskClientOptions extends ConnectionOptions {
  readonly connection?: ServiceConnection;
}

const segment = encodeURIComponent;

function defined(fields: Record<string, unknown>): JsonObject {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

/** A typed client for the task API (`/v1/tasks`, scope `writer`); see the module comment. */
export class TaskClient {
  readonly connection: ServiceConnection;

  constructor(options: TaskClientOptions = {}) {
    this.connection = options.connection ?? new ServiceConnection(options);
  }

  private async call(
    method: "GET" | "POST",
    path: string,
    retry: boolean,
    options: CallOptions & {
      json?: unknown;
      params?: Record<string, string | number>;
      timeoutMs?: number;
    },
  ): Promise<unknown> {
    return this.connection.request({
      method,
      path,
      retry,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
      ...(options.json === undefined ? {} : { json: options.json }),
      ...(options.params === undefined ? {} : { params: options.params }),
    });
  }

  // ---- requester -----------------------------------------------------------------------

  /** A new `working` task (attempt 1), answered once durably stored. Never retried. */
  async create(options: CreateTaskOptions = {}): Promise<Task> {
    const json = defined({
      principal: options.principal,
      ttl_ms: options.ttlMs,
      poll_interval_ms: options.pollIntervalMs,
      request: options.request,
      lease_seconds: options.leaseSeconds,
      producer: options.producer,
    });
    return parseTask(await this.call("POST", "/v1/tasks", false, { ...options, json }));
  }

  /** The task; `UnknownTask` for an unknown, expired or another principal's task. */
  async get(taskId: string, options: RequesterOptions = {}): Promise<Task> {
    const params = defined({ principal: options.principal }) as Record<string, string>;
    const path = `/v1/tasks/${segment(taskId)}`;
    return parseTask(await this.call("GET", path, true, { ...options, params }));
  }

  /** Answer the task's input requests by key; `accepted` lists the keys taken. */
  async answer(
    taskId: string,
    inputResponses: JsonObject,
    options: RequesterOptions = {},
  ): Promise<InputAnswer> {
    const json = defined({ principal: options.principal, input_responses: inputResponses });
    const path = `/v1/tasks/${segment(taskId)}/input`;
    return parseInputAnswer(await this.call("POST", path, true, { ...options, json }));
  }

  /** Cancel the task: `cancelled` at once; a task that already settled stays as it is. */
  async cancel(taskId: string, options: RequesterOptions = {}): Promise<Task> {
    const json = defined({ principal: options.principal });
    const path = `/v1/tasks/${segment(taskId)}/cancel`;
    return parseTask(await this.call("POST", path, true, { ...options, json }));
  }

  /** The current attempt's events after `after` (`wait`: a long-poll, in seconds). */
  async events(taskId: string, options: TaskEventsOptions = {}): Promise<TaskEventsPage> {
    const params = defined({
      principal: options.principal,
      after: options.after ?? 0,
      limit: options.limit,
      wait: options.wait,
    }) as Record<string, string | number>;
    const path = `/v1/tasks/${segment(taskId)}/events`;
    const timeoutMs =
      options.wait === undefined ? undefined : this.connection.timeoutMs + options.wait * 1000;
    const answer = await this.call("GET", path, true, {
      ...options,
      params,
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    });
    return parseTaskEventsPage(answer);
  }

  /**
   * Follow the task's events live on one connection (see `live.ts`): a new attempt is a
   * `reset`, a settled task ends with `end`. Reconnect with the last id to continue.
   */
  follow(
    taskId: string,
    options: FollowOptions & { readonly principal?: string | undefined } = {},
  ): AsyncGenerator<LiveEvent, void, undefined> {
    const query = options.principal === undefined ? "" : `?principal=${segment(options.principal)}`;
    return followPath(this.connection, `/v1/tasks/${segment(taskId)}/live${query}`, options);
  }

  // ---- worker --------------------------------------------------------------------------

  /** Move the task (fenced by `attempt`; renews the lease, ends it when terminal). Sent once. */
  async setStatus(
    taskId: string,
    attempt: number,
    status: TaskStatus,
    options: StatusOptions = {},
  ): Promise<Task> {
    const json = defined({
      attempt,
      status,
      status_message: options.statusMessage,
      result: options.result,
      error: options.error,
      input_requests: options.inputRequests,
    });
    const path = `/v1/tasks/${segment(taskId)}/status`;
    return parseTask(await this.call("POST", path, false, { ...options, json }));
  }

  /** Renew the worker's lease; the answer carries the task, its `inputResponses` included. */
  async renew(
    taskId: string,
    attempt: number,
    options: CallOptions & { readonly statusMessage?: string | undefined } = {},
  ): Promise<Task> {
    const json = defined({ attempt, status_message: options.statusMessage });
    const path = `/v1/tasks/${segment(taskId)}/lease`;
    return parseTask(await this.call("POST", path, true, { ...options, json }));
  }

  /** Append progress events of the attempt (renews its lease); retried only with `firstSeq`. */
  async append(
    taskId: string,
    attempt: number,
    events: readonly NewEvent[],
    options: CallOptions & { readonly firstSeq?: number | undefined } = {},
  ): Promise<TaskAppend> {
    const json = defined({
      attempt,
      events: events.map((e) => ({ data: e.data, event: e.event ?? null })),
      first_seq: options.firstSeq,
    });
    const path = `/v1/tasks/${segment(taskId)}/events`;
    const retry = options.firstSeq !== undefined;
    return parseTaskAppend(await this.call("POST", path, retry, { ...options, json }));
  }

  /** A new attempt, fencing the holder of `supersedes` (`Superseded` if another won). */
  async takeOver(
    taskId: string,
    supersedes: number,
    options: CallOptions & {
      readonly leaseSeconds?: number | undefined;
      readonly producer?: string | undefined;
    } = {},
  ): Promise<Task> {
    const json = defined({
      supersedes,
      lease_seconds: options.leaseSeconds,
      producer: options.producer,
    });
    const path = `/v1/tasks/${segment(taskId)}/attempts`;
    return parseTask(await this.call("POST", path, false, { ...options, json }));
  }
}
