/**
 * The log as the task store of SDK 1.x (`@modelcontextprotocol/sdk` 1.32: the experimental
 * 2025-11-25 tasks, `TaskStore` of `@modelcontextprotocol/sdk/experimental/tasks`).
 *
 * ```ts
 * const server = new McpServer(info, {
 *   capabilities: { tasks: { requests: { tools: { call: {} } } } },
 *   taskStore: new EventLogTaskStoreV1(new TaskClient({ baseUrl })),
 * });
 * ```
 *
 * SDK 1.x serves `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` itself from
 * the `taskStore` it is given; with this one they answer from the log, so any replica
 * answers for a task another created. What the mapping is:
 *
 * - `createTask` stores the task (durable before it returns) and renews its worker lease
 *   from this process until a result is stored: if the process dies first, the service
 *   settles it `failed` / `worker_lost` instead of leaving it `working`.
 * - `storeTaskResult(…, "completed", result)` is `completed` with the result;
 *   `"failed"` is `failed` with `{code: -32603, message, data: {result}}` (the service keeps a
 *   JSON-RPC error for a failed task) and `getTaskResult` gives the stored result back.
 * - `updateTaskStatus` moves it (`cancelled` is a cancel; `input_required` is recorded with
 *   one placeholder request, since 1.x queues the real ones in its message queue).
 * - `listTasks` lists nothing: the service lists tasks only to operators, and the extension
 *   of 2026-07-28 removed `tasks/list`.
 * - The `sessionId` 1.x passes is not a principal: a replica serving another session must
 *   still find the task. The 128-bit task id is the capability.
 */

import { UnknownTask } from "./errors.js";
import { type JsonObject, type Task, type TaskClient, type TaskStatus } from "./tasks.js";

/** A task as SDK 1.x (2025-11-25) shows it. */
export interface TaskV1 {
  taskId: string;
  status: TaskStatus;
  ttl: number | null;
  createdAt: string;
  lastUpdatedAt: string;
  pollInterval?: number;
  statusMessage?: string;
}

const QUEUED = { "io.modelcontextprotocol/queued": { method: "tasks/result" } };

function v1(task: Task): TaskV1 {
  const shown: TaskV1 = {
    taskId: task.taskId,
    status: task.status,
    ttl: task.ttlMs,
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    pollInterval: task.pollIntervalMs,
  };
  if (task.statusMessage !== null) shown.statusMessage = task.statusMessage;
  return shown;
}

function textOf(result: JsonObject): string | undefined {
  const content = result["content"];
  if (!Array.isArray(content)) return undefined;
  const first = content[0] as { text?: unknown } | undefined;
  return typeof first?.text === "string" ? first.text : undefined;
}

/** `TaskStore` of SDK 1.x over the log (see the module comment). */
export class EventLogTaskStoreV1 {
  private readonly held = new Map<
    string,
    { attempt: number; timer: ReturnType<typeof setInterval> }
  >();
  readonly leaseSeconds: number;

  constructor(
    readonly tasks: TaskClient,
    options: { readonly leaseSeconds?: number } = {},
  ) {
    this.leaseSeconds = options.leaseSeconds ?? 30;
  }

  async createTask(
    taskParams: { ttl?: number | null; pollInterval?: number },
    _requestId?: unknown,
    request?: { method: string; params?: unknown },
  ): Promise<TaskV1> {
    const task = await this.tasks.create({
      ttlMs: taskParams.ttl ?? undefined,
      pollIntervalMs: taskParams.pollInterval,
      leaseSeconds: this.leaseSeconds,
      request: request === undefined ? undefined : { method: request.method },
    });
    // The lease is renewed from here until a result is stored (a third of it per beat).
    const timer = setInterval(
      () => {
        this.tasks.renew(task.taskId, task.attempt).catch(() => this.release(task.taskId));
      },
      (this.leaseSeconds * 1000) / 3,
    );
    timer.unref();
    this.held.set(task.taskId, { attempt: task.attempt, timer });
    return v1(task);
  }

  async getTask(taskId: string): Promise<TaskV1 | null> {
    try {
      return v1(await this.tasks.get(taskId));
    } catch (error) {
      if (error instanceof UnknownTask) return null;
      throw error;
    }
  }

  async storeTaskResult(
    taskId: string,
    status: "completed" | "failed",
    result: JsonObject,
  ): Promise<void> {
    const attempt = await this.attemptOf(taskId);
    try {
      if (status === "completed") {
        await this.tasks.setStatus(taskId, attempt, "completed", { result });
      } else {
        const message = textOf(result) ?? "the task failed";
        const error = { code: -32603, message, data: { result } };
        await this.tasks.setStatus(taskId, attempt, "failed", { error });
      }
    } finally {
      this.release(taskId);
    }
  }

  async getTaskResult(taskId: string): Promise<JsonObject> {
    const task = await this.tasks.get(taskId);
    if (task.status === "completed" && task.result !== null) return task.result;
    if (task.status === "failed" && task.error !== null) {
      const data = task.error["data"] as { result?: JsonObject } | undefined;
      if (data?.result !== undefined) return data.result;
      const message = String(task.error["message"] ?? "the task failed");
      return { content: [{ type: "text", text: message }], isError: true };
    }
    throw new Error(`task ${taskId} has no result (it is ${task.status})`);
  }

  async updateTaskStatus(
    taskId: string,
    status: TaskStatus,
    statusMessage?: string,
  ): Promise<void> {
    if (status === "cancelled") {
      await this.tasks.cancel(taskId);
      this.release(taskId);
      return;
    }
    const attempt = await this.attemptOf(taskId);
    if (status === "failed") {
      const error = { code: -32603, message: statusMessage ?? "the task failed" };
      await this.tasks.setStatus(taskId, attempt, "failed", { error, statusMessage });
      this.release(taskId);
    } else if (status === "input_required") {
      await this.tasks.setStatus(taskId, attempt, "input_required", {
        inputRequests: QUEUED,
        statusMessage,
      });
    } else if (status === "working") {
      const task = await this.tasks.get(taskId);
      if (task.status === "working") await this.tasks.renew(taskId, attempt, { statusMessage });
      else await this.tasks.setStatus(taskId, attempt, "working", { statusMessage });
    } else {
      throw new Error("a completed task is stored with storeTaskResult");
    }
  }

  async listTasks(): Promise<{ tasks: TaskV1[] }> {
    return { tasks: [] };
  }

  /** Stop renewing every lease this store holds (the tasks then settle `worker_lost`). */
  close(): void {
    for (const taskId of [...this.held.keys()]) this.release(taskId);
  }

  private async attemptOf(taskId: string): Promise<number> {
    return this.held.get(taskId)?.attempt ?? (await this.tasks.get(taskId)).attempt;
  }

  private release(taskId: string): void {
    const held = this.held.get(taskId);
    if (held === undefined) return;
    clearInterval(held.timer);
    this.held.delete(taskId);
  }
}
