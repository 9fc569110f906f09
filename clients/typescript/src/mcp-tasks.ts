/**
 * MCP's tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) for a server built on the
 * official TypeScript SDK, with the task record in the log.
 *
 * ```ts
 * const tasks = new EventLogTasks(new TaskRunner(new TaskClient({ baseUrl })));
 * function make() {
 *   const server = new McpServer(info, { capabilities: { extensions: tasks.capability } });
 *   tasks.attach(server.server); // tasks/get, tasks/update, tasks/cancel
 *   server.registerTool("slow_compute", {}, tasks.tool(async (args, ctx, run) => {
 *     await run?.progress({ progress: 50, total: 100 });
 *     return { content: [{ type: "text", text: "42" }] };
 *   }));
 *   return server;
 * }
 * ```
 *
 * What SDK 2.4.0 (`@modelcontextprotocol/server`) allows, and what this builds on: a server
 * registers custom request methods with `setRequestHandler(method, { params }, handler)`
 * (they are reachable on 2026-07-28), reads the request's declared capabilities from
 * `ctx.mcpReq.envelope`, and a tool handler may answer `tools/call` with a
 * `CreateTaskResult` (`resultType: "task"`), which the server sends as it is. The SDK ships
 * no task store and no `tasks/*` handlers; its own `Client` refuses a `resultType: "task"`
 * answer (`UNSUPPORTED_RESULT_TYPE`), so requesters need a client that knows the extension.
 *
 * `EventLogTasks.tool(handler)` runs a call from a requester that declared the extension as
 * a task (stored in the log before the `CreateTaskResult` is answered; the handler is the
 * task's function under a `TaskRunner`), and the call as usual for one that did not. `tasks/get`, `tasks/update` and `tasks/cancel` answer
 * from the log, so any replica serves them; an unknown, expired or another principal's task
 * is `-32602`, a requester that did not declare the extension `-32021`, and a request whose
 * `Mcp-Name` header names another task `-32020`.
 */

import { UnknownTask, TerminalGeneration } from "./errors.js";
import type { TaskRun, TaskRunner } from "./task-runner.js";
import { type JsonObject, type TaskClient, toMcpTask } from "./tasks.js";

export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
const CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities";

/**
 * A JSON-RPC error the SDK answers with (it keeps a thrown error's numeric `code`).
 *
 * The one class besides `EventLogError` directly under `Error`: it is the answer a handler
 * gives the SDK, not a failure of this client, and its `code` must stay the JSON-RPC number
 * the SDK reads (an `EventLogError`'s `code` is a string, and the SDK answers `-32603` for a
 * thrown error without a numeric one).
 */
export class TasksProtocolError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "TasksProtocolError";
  }
}

/** What this module reads of the SDK's handler context (2.x `ServerContext`). */
export interface TaskHandlerContext {
  readonly mcpReq?:
    | {
        readonly envelope?: Record<string, unknown> | undefined;
        /** Where SDK 2.x puts a request's `inputResponses` (it lifts them out of params). */
        readonly inputResponses?: Record<string, unknown> | undefined;
      }
    | undefined;
  readonly http?: { readonly req?: { readonly headers: Headers } | undefined } | undefined;
}

/** A Standard Schema (what the SDK's custom-method registration validates params with). */
interface ParamsSchema<T> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    validate(value: unknown): { value: T } | { issues: { message: string }[] };
  };
}

/** The SDK 2.x `Server` (`McpServer.server`): its custom-method registration,
 *  `setRequestHandler(method, { params }, handler)`. */
export interface CustomMethodServer {
  readonly setRequestHandler: (...args: never[]) => unknown;
}

interface TaskIdParams {
  readonly taskId: string;
}

interface UpdateParams extends TaskIdParams {
  readonly inputResponses?: JsonObject;
}

function schema<T>(check: (value: Record<string, unknown>) => string | undefined): ParamsSchema<T> {
  return {
    "~standard": {
      version: 1,
      vendor: "mcp-eventlog",
      validate(value) {
        if (typeof value !== "object" || value === null) {
          return { issues: [{ message: "params must be an object" }] };
        }
        const problem = check(value as Record<string, unknown>);
        return problem === undefined ? { value: value as T } : { issues: [{ message: problem }] };
      },
    },
  };
}

const taskIdSchema = schema<TaskIdParams>((v) =>
  typeof v["taskId"] === "string" ? undefined : "taskId must be a string",
);
const updateSchema = schema<UpdateParams>((v) => {
  if (typeof v["taskId"] !== "string") return "taskId must be a string";
  const answers = v["inputResponses"];
  if (answers === undefined) return undefined; // the SDK lifts it into ctx.mcpReq
  if (typeof answers !== "object" || answers === null || Array.isArray(answers)) {
    return "inputResponses must be an object";
  }
  return undefined;
});

/** Whether the request declared the tasks extension in its capabilities (2026-07-28). */
export function declaresTasks(ctx: TaskHandlerContext | undefined): boolean {
  const capabilities = ctx?.mcpReq?.envelope?.[CAPABILITIES_KEY];
  if (typeof capabilities !== "object" || capabilities === null) return false;
  const extensions = (capabilities as { extensions?: unknown }).extensions;
  return typeof extensions === "object" && extensions !== null && TASKS_EXTENSION in extensions;
}

function missingCapability(): TasksProtocolError {
  return new TasksProtocolError(-32021, "Missing required client capability", {
    requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
  });
}

function notFound(): TasksProtocolError {
  // One answer for never issued, expired and another's: the id reveals nothing.
  return new TasksProtocolError(-32602, "Failed to retrieve task: Task not found");
}

/** Options of `EventLogTasks`. */
export interface EventLogTasksOptions<Ctx> {
  /** The principal a task is bound to; default none (the 128-bit task id is the capability). */
  readonly principal?: (ctx: Ctx) => string | undefined;
  readonly ttlMs?: number;
  readonly pollIntervalMs?: number;
}

/** The tasks extension over the log (see the module comment). */
export class EventLogTasks<Ctx extends TaskHandlerContext = TaskHandlerContext> {
  /** What to put under `capabilities.extensions` of the server. */
  readonly capability: Record<string, Record<string, never>> = { [TASKS_EXTENSION]: {} };
  readonly tasks: TaskClient;

  constructor(
    readonly runner: TaskRunner,
    private readonly options: EventLogTasksOptions<Ctx> = {},
  ) {
    this.tasks = runner.tasks;
  }

  private principalOf(ctx: Ctx): string | undefined {
    return this.options.principal?.(ctx);
  }

  /** Serve `tasks/get`, `tasks/update`, `tasks/cancel` on `server` (SDK 2.x: `mcp.server`). */
  attach(server: CustomMethodServer): void {
    const register = server.setRequestHandler.bind(server) as unknown as <P>(
      method: string,
      schemas: { params: ParamsSchema<P> },
      handler: (params: P, ctx: Ctx) => Promise<Record<string, unknown>>,
    ) => void;
    register("tasks/get", { params: taskIdSchema }, async (params, ctx) => {
      this.check(params, ctx);
      try {
        const task = await this.tasks.get(params.taskId, { principal: this.principalOf(ctx) });
        return { resultType: "complete", ...toMcpTask(task) };
      } catch (error) {
        if (error instanceof UnknownTask) throw notFound();
        throw error;
      }
    });
    register("tasks/update", { params: updateSchema }, async (params, ctx) => {
      this.check(params, ctx);
      try {
        const answers = params.inputResponses ?? ctx.mcpReq?.inputResponses ?? {};
        await this.tasks.answer(params.taskId, answers, {
          principal: this.principalOf(ctx),
        });
      } catch (error) {
        if (error instanceof UnknownTask) throw notFound();
        // A settled task takes no answers; the acknowledgement says nothing more.
        if (!(error instanceof TerminalGeneration)) throw error;
      }
      return { resultType: "complete" };
    });
    register("tasks/cancel", { params: taskIdSchema }, async (params, ctx) => {
      this.check(params, ctx);
      try {
        await this.tasks.cancel(params.taskId, { principal: this.principalOf(ctx) });
      } catch (error) {
        if (error instanceof UnknownTask) throw notFound();
        throw error;
      }
      return { resultType: "complete" };
    });
  }

  private check(params: TaskIdParams, ctx: Ctx): void {
    if (!declaresTasks(ctx)) throw missingCapability();
    const named = ctx.http?.req?.headers.get("mcp-name");
    if (named !== null && named !== undefined && named !== params.taskId) {
      throw new TasksProtocolError(-32020, "the Mcp-Name header does not match params.taskId");
    }
  }

  /**
   * Wrap a tool handler for `McpServer.registerTool`: for a requester that declared the
   * extension the call becomes a task (the handler runs as its function, given the
   * `TaskRun`), answered with its `CreateTaskResult` once stored; otherwise the handler runs
   * as usual (`run` undefined). The handler gets the tool's arguments (`{}` for a tool
   * without an input schema) and the SDK's context.
   *
   * `required` refuses a requester that did not declare the extension; SDK 2.4.0 answers
   * every error a registered tool throws as a tool error (`isError: true`), so that refusal
   * reaches it as one carrying the `-32021` message, not as a JSON-RPC error.
   */
  tool<Args = Record<string, unknown>>(
    handler: (args: Args, ctx: Ctx, run: TaskRun | undefined) => Promise<unknown>,
    options: { readonly required?: boolean } = {},
  ): (...sdkArgs: unknown[]) => Promise<never> {
    const wrapped = async (...sdkArgs: unknown[]): Promise<unknown> => {
      // The SDK calls (args, ctx) for a tool with an input schema, (ctx) for one without.
      const ctx = sdkArgs[sdkArgs.length - 1] as Ctx;
      const args = (sdkArgs.length > 1 ? sdkArgs[0] : {}) as Args;
      if (!declaresTasks(ctx)) {
        if (options.required === true) throw missingCapability();
        return handler(args, ctx, undefined);
      }
      const started = await this.runner.start(async (run) => handler(args, ctx, run), {
        principal: this.principalOf(ctx),
        ttlMs: this.options.ttlMs,
        pollIntervalMs: this.options.pollIntervalMs,
        request: { method: "tools/call", params: { arguments: args } },
      });
      return { resultType: "task", ...toMcpTask(started.task) };
    };
    // The SDK types a tool's answer as a `CallToolResult`; a `CreateTaskResult` is what the
    // extension puts in its place, and the SDK sends it as it is.
    return wrapped as (...sdkArgs: unknown[]) => Promise<never>;
  }
}
