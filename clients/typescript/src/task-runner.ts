/**
 * Run an async function as a durable task: for MCP servers that are not behind the gateway.
 *
 * ```ts
 * const runner = new TaskRunner(new TaskClient({ baseUrl }), { leaseSeconds: 30 });
 * const started = await runner.start(async (run) => {
 *   await run.progress({ progress: 50, total: 100 });
 *   const answers = await run.ask({ confirm: { method: "elicitation/create", params: {} } });
 *   return { content: [{ type: "text", text: "done" }], isError: false };
 * }, { principal: "alice" });
 * started.task;           // stored before start() resolves: tasks/get finds it on any replica
 * await started.settled;  // the settled task
 * ```
 *
 * What holds while a task runs here:
 *
 * - **Durable before answering.** `start` resolves once the service stored the task.
 * - **The lease is renewed however silent the work is**: a heartbeat every
 *   `leaseSeconds / 3` (`renewEveryMs`); progress events renew it too. If this process dies
 *   the renewals stop and the service settles the task `failed` / `worker_lost` within the
 *   lease plus its sweep: never `working` for ever.
 * - **Every way out settles the task.** The function's value → `completed` with it as the
 *   result (a `CallToolResult`; `isError: true` stays `completed`); a `TaskFailed` (or any
 *   error carrying a numeric `code` and a `message`, as the SDK's `McpError` does) →
 *   `failed` with that JSON-RPC error; anything else thrown → `failed` with `-32603`;
 *   `RunningTask.stop()` / `TaskRunner.close()` → `failed`, `data.reason: "worker_stopped"`.
 * - **A cancel is learned from the log.** A requester's cancel settles the task `cancelled`
 *   in the service; the worker's next write (the heartbeat included) is refused `409
 *   terminal`: the runner aborts `run.signal` and writes nothing more. So does `Superseded`
 *   (another worker took the task over).
 * - **Input rounds.** `run.ask(requests)` moves the task to `input_required`, waits (polling
 *   its lease, which renews it) until every key is answered, moves it back to `working` and
 *   resolves with the answers.
 */

import { EventLogError, ServiceUnreachable, Superseded, TerminalGeneration } from "./errors.js";
import { UnknownTask } from "./errors.js";
import { retryDelayMs, sleep } from "./connection.js";
import {
  type JsonObject,
  type Task,
  type TaskClient,
  type TaskStatus,
  type CreateTaskOptions,
} from "./tasks.js";

export const INTERNAL_ERROR = -32603;

/**
 * Throw from a task's function to settle it `failed` with this JSON-RPC error: `rpcCode`,
 * `message` (the error's own message) and `data`. As an `EventLogError` its `status` is 0 and
 * its `code` `task_failed`, as in the Python client.
 */
export class TaskFailed extends EventLogError {
  static override readonly code = "task_failed";

  constructor(
    readonly rpcCode: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(0, TaskFailed.code, `${rpcCode}: ${message}`, { message });
  }

  /** The JSON-RPC error object. */
  toError(): JsonObject {
    const { rpcCode: code, message, data } = this;
    return data === undefined ? { code, message } : { code, message, data };
  }
}

/**
 * The task can no longer be written by this worker (cancelled, settled or taken over): `status`
 * 0, `code` `task_stopped`, `detail` the `reason`.
 */
export class TaskStopped extends EventLogError {
  static override readonly code = "task_stopped";

  constructor(readonly reason: string) {
    super(0, TaskStopped.code, reason, {
      message: `the task is no longer this worker's: ${reason}`,
    });
  }
}

/** The JSON-RPC error a task whose function threw `error` is settled with. */
export function errorOf(error: unknown): JsonObject {
  if (error instanceof TaskFailed) return error.toError();
  if (typeof error === "object" && error !== null) {
    const { code, message, data } = error as { code?: unknown; message?: unknown; data?: unknown };
    if (typeof code === "number" && Number.isInteger(code) && typeof message === "string") {
      return data === undefined ? { code, message } : { code, message, data };
    }
  }
  const message = error instanceof Error ? error.message || error.name : String(error);
  return { code: INTERNAL_ERROR, message };
}

function stoppedBy(error: unknown): string | undefined {
  if (
    error instanceof TerminalGeneration ||
    error instanceof Superseded ||
    error instanceof UnknownTask
  ) {
    return error.code;
  }
  return undefined;
}

/** What the task's function is given: its task, and the worker's writes to it. */
export class TaskRun {
  /** Aborted when the task is no longer this worker's (cancelled, settled elsewhere, taken
   *  over) or the runner stops it: pass it on to the work's own calls. */
  readonly signal: AbortSignal;
  /** @internal */
  readonly controller = new AbortController();
  /** @internal */
  stoppedInService = false;
  /** @internal */
  stoppedHere = false;

  constructor(
    readonly tasks: TaskClient,
    public task: Task,
    readonly principal: string | undefined,
    private readonly pollMs: number,
  ) {
    this.signal = this.controller.signal;
  }

  get taskId(): string {
    return this.task.taskId;
  }

  /** This worker's attempt (its fencing token). */
  get attempt(): number {
    return this.task.attempt;
  }

  /** Record a progress event (an object is sent as its JSON); renews the lease. */
  async progress(data: string | JsonObject, event = "progress"): Promise<void> {
    const text = typeof data === "string" ? data : JSON.stringify(data);
    await this.write(() => this.tasks.append(this.taskId, this.attempt, [{ data: text, event }]));
  }

  /** Set the task's `statusMessage` (renews the lease). */
  async say(statusMessage: string): Promise<void> {
    this.task = await this.write(() =>
      this.tasks.renew(this.taskId, this.attempt, { statusMessage }),
    );
  }

  /** One input round: `input_required` until every key of `inputRequests` is answered. */
  async ask(
    inputRequests: JsonObject,
    options: { readonly statusMessage?: string } = {},
  ): Promise<JsonObject> {
    this.task = await this.write(() =>
      this.tasks.setStatus(this.taskId, this.attempt, "input_required", {
        inputRequests,
        statusMessage: options.statusMessage,
      }),
    );
    const wanted = Object.keys(inputRequests);
    for (;;) {
      const answers = this.task.inputResponses ?? {};
      if (wanted.every((key) => key in answers)) {
        this.task = await this.write(() =>
          this.tasks.setStatus(this.taskId, this.attempt, "working"),
        );
        return Object.fromEntries(wanted.map((key) => [key, answers[key]]));
      }
      await sleep(this.pollMs, this.signal);
      this.task = await this.write(() => this.tasks.renew(this.taskId, this.attempt));
    }
  }

  /** @internal */
  stop(inService: boolean, reason: string): void {
    if (inService) this.stoppedInService = true;
    else this.stoppedHere = true;
    this.controller.abort(new TaskStopped(reason));
  }

  private async write<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      const reason = stoppedBy(error);
      if (reason !== undefined) {
        this.stop(true, reason);
        throw new TaskStopped(reason);
      }
      throw error;
    }
  }
}

/** A task being run: `task` as created, `settled` once this worker is done with it. */
export interface RunningTask {
  readonly task: Task;
  readonly settled: Promise<Task>;
  /** Stop the function (its `run.signal` aborts); the task is settled `failed`. */
  stop(): void;
}

/** The task's function: resolves with the result (a `CallToolResult`). */
export type TaskWork = (run: TaskRun) => Promise<unknown>;

/** Options of a `TaskRunner`. */
export interface TaskRunnerOptions {
  /** Each task's worker lease; default 30. */
  readonly leaseSeconds?: number;
  /** How often the heartbeat renews it; default a third of the lease. */
  readonly renewEveryMs?: number;
  /** How often `run.ask` looks for answers; default 250. */
  readonly pollMs?: number;
  readonly producer?: string;
}

/** Runs async functions as tasks recorded in the log (see the module comment). */
export class TaskRunner {
  readonly leaseSeconds: number;
  readonly renewEveryMs: number;
  readonly pollMs: number;
  private readonly running = new Set<RunningTask>();

  constructor(
    readonly tasks: TaskClient,
    private readonly options: TaskRunnerOptions = {},
  ) {
    this.leaseSeconds = options.leaseSeconds ?? 30;
    this.renewEveryMs = options.renewEveryMs ?? (this.leaseSeconds * 1000) / 3;
    this.pollMs = options.pollMs ?? 250;
  }

  /** Create the task (durable when this resolves) and run `work` in the background. */
  async start(
    work: TaskWork,
    options: Omit<CreateTaskOptions, "leaseSeconds" | "producer"> = {},
  ): Promise<RunningTask> {
    const task = await this.tasks.create({
      ...options,
      leaseSeconds: this.leaseSeconds,
      producer: this.options.producer,
    });
    const run = new TaskRun(this.tasks, task, options.principal, this.pollMs);
    const settled = this.drive(run, work);
    const running: RunningTask = {
      task,
      settled,
      stop: () => run.stop(false, "worker_stopped"),
    };
    this.running.add(running);
    void settled.then(
      () => this.running.delete(running),
      () => this.running.delete(running),
    );
    return running;
  }

  /** `start`, then wait for the task to settle. */
  async run(work: TaskWork, options: Omit<CreateTaskOptions, "leaseSeconds" | "producer"> = {}) {
    return (await this.start(work, options)).settled;
  }

  /** Stop every function still running; each task is settled `failed`. */
  async close(): Promise<void> {
    const running = [...this.running];
    for (const one of running) one.stop();
    await Promise.allSettled(running.map((one) => one.settled));
  }

  private async drive(run: TaskRun, work: TaskWork): Promise<Task> {
    const beating = this.heartbeat(run);
    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    try {
      // The function races its own signal: a stop is immediate even for work that ignores it.
      const aborted = new Promise<never>((_, reject) => {
        if (run.signal.aborted) reject(run.signal.reason);
        run.signal.addEventListener("abort", () => reject(run.signal.reason), { once: true });
      });
      aborted.catch(() => undefined);
      outcome = { ok: true, value: await Promise.race([work(run), aborted]) };
    } catch (error) {
      outcome = { ok: false, error };
    } finally {
      run.controller.abort(new TaskStopped("done"));
      await beating;
    }
    if (run.stoppedInService) return this.current(run);
    if (run.stoppedHere) {
      return this.settle(run, "failed", {
        error: {
          code: INTERNAL_ERROR,
          message: "the worker stopped before the task settled",
          data: { reason: "worker_stopped" },
        },
      });
    }
    if (!outcome.ok) return this.settle(run, "failed", { error: errorOf(outcome.error) });
    const value = outcome.value;
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      const message = "a task's result must be a JSON object";
      return this.settle(run, "failed", { error: { code: INTERNAL_ERROR, message } });
    }
    try {
      return await this.settle(run, "completed", { result: value as JsonObject });
    } catch (error) {
      if (!(error instanceof EventLogError) || error instanceof ServiceUnreachable) throw error;
      // The result itself was refused (over a size limit): the task still settles.
      const message = `the result was not stored: ${error.message}`;
      return this.settle(run, "failed", { error: { code: INTERNAL_ERROR, message } });
    }
  }

  private async heartbeat(run: TaskRun): Promise<void> {
    while (!run.signal.aborted) {
      try {
        await sleep(this.renewEveryMs, run.signal);
      } catch {
        return;
      }
      try {
        run.task = await run.tasks.renew(run.taskId, run.attempt);
      } catch (error) {
        const reason = stoppedBy(error);
        if (reason !== undefined) {
          run.stop(true, reason);
          return;
        }
        // Unreachable or refused for now: the next beat, well within the lease, tries again.
      }
    }
  }

  /** Write the outcome; a repeat after no answer is safe (a stored one makes it `terminal`). */
  private async settle(
    run: TaskRun,
    status: TaskStatus,
    payload: { result?: JsonObject; error?: JsonObject },
  ): Promise<Task> {
    const policy = run.tasks.connection.retry;
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await run.tasks.setStatus(run.taskId, run.attempt, status, payload);
      } catch (error) {
        if (stoppedBy(error) !== undefined) return this.current(run);
        if (!(error instanceof ServiceUnreachable) || attempt + 1 >= policy.attempts) throw error;
        await sleep(retryDelayMs(policy, attempt));
      }
    }
  }

  private async current(run: TaskRun): Promise<Task> {
    try {
      return await run.tasks.get(run.taskId, { principal: run.principal });
    } catch {
      return run.task;
    }
  }
}
