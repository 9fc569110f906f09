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

import type { CallOptions, PageOptions } from "./client.js";
import { type ClientOptions, ServiceClient } from "./connection.js";
import { followPath, type FollowOptions, type LiveEvent } from "./live.js";
import type { NewEvent } from "./models.js";
import {
  type JsonObject,
  parseInputAnswer,
  parseTask,
  parseTaskAppend,
  parseTaskEventsPage,
  type InputAnswer,
  type Task,
  type TaskAppend,
  type TaskEventsPage,
  type TaskStatus,
} from "./task-models.js";

export {
  type InputAnswer,
  isTerminal,
  isWorkerLost,
  type JsonObject,
  parseTask,
  type Task,
  type TaskAppend,
  type TaskEventsPage,
  type TaskStatus,
  TERMINAL_STATUSES,
  toMcpTask,
} from "./task-models.js";

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

/** Which of the current attempt's events a page holds: a generation's page options. */
export interface TaskEventsOptions extends RequesterOptions, PageOptions {}

/** Options of `TaskClient`: how to reach the service, or a shared connection. */
export type TaskClientOptions = ClientOptions;

const segment = encodeURIComponent;

function defined(fields: Record<string, unknown>): JsonObject {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

/** A typed client for the task API (`/v1/tasks`, scope `writer`); see the module comment. */
export class TaskClient extends ServiceClient {
  private async call(
    method: "GET" | "POST",
    path: string,
    retry: boolean,
    options: CallOptions & {
      json?: unknown;
      params?: Record<string, string | number>;
      wait?: number | undefined;
    },
  ): Promise<unknown> {
    return this.connection.request({
      method,
      path,
      retry,
      signal: options.signal,
      wait: options.wait,
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
    }) as Record<string, string | number>;
    const path = `/v1/tasks/${segment(taskId)}/events`;
    return parseTaskEventsPage(await this.call("GET", path, true, { ...options, params }));
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
