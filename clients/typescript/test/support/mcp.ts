/**
 * Real MCP servers and clients of both TypeScript SDK generations, wired as the docs say:
 *
 * - server `v1`: `@modelcontextprotocol/sdk` 1.x, `McpServer` + `StreamableHTTPServerTransport`;
 * - server `v2`: `@modelcontextprotocol/server` 2.x, a strict 2026-07-28 handler
 *   (`createMcpHandler(..., { legacy: "reject" })`) with legacy requests (`isLegacyRequest`)
 *   routed to a sessionful `WebStandardStreamableHTTPServerTransport`, served on `node:http`
 *   through `@hono/node-server`'s `getRequestListener` (not `@modelcontextprotocol/node`'s
 *   `toNodeHandler`, which notices a client gone only at the next chunk: see
 *   docs/clients-typescript.md);
 *
 * each with one `EventLogEventStore` per session; and clients of either generation
 * (`@modelcontextprotocol/sdk` 1.x, `@modelcontextprotocol/client` 2.x, which negotiates a
 * 2025 revision by default) whose connections a test can cut, hold back or tamper with.
 */

import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";

import {
  Client as ClientV2,
  ProtocolError,
  SdkError,
  StreamableHTTPClientTransport as ClientTransportV2,
} from "@modelcontextprotocol/client";
import { getRequestListener } from "@hono/node-server";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as ClientTransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer as McpServerV1 } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolResultSchema,
  LoggingMessageNotificationSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";
import {
  createMcpHandler,
  isLegacyRequest,
  McpServer as McpServerV2,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import { z } from "zod";

import {
  EventLogEventStore,
  type EventLogEventStoreOptions,
  type StoreLogger,
} from "../../src/index.js";
import { Gate } from "./wait.js";

/** An SDK generation. */
export type Sdk = "v1" | "v2";

/** Collects what the stores log, by level. */
export class Logbook implements StoreLogger {
  readonly lines: { level: string; message: string }[] = [];
  info(message: string): void {
    this.lines.push({ level: "info", message });
  }
  warn(message: string): void {
    this.lines.push({ level: "warn", message });
  }
  error(message: string): void {
    this.lines.push({ level: "error", message });
  }
  has(level: string, pattern: RegExp): boolean {
    return this.lines.some((l) => l.level === level && pattern.test(l.message));
  }
}

interface StepsArgs {
  run: string;
  count: number;
  pauseAfter?: number | undefined;
  holdResult?: boolean | undefined;
}

type Notify = (data: string) => Promise<void>;

/** A session's transport: `handleRequest` differs between the generations, the rest does not. */
interface SessionTransport {
  close(): Promise<void>;
  onerror?: ((error: Error) => void) | undefined;
}

/** What a session's transport is made with, in either generation. */
interface SessionOptions {
  sessionIdGenerator: () => string;
  eventStore: EventLogEventStore;
  retryInterval: number;
  onsessioninitialized: (id: string) => void;
}

/**
 * The MCP server. Tool `steps` sends `count` log notifications `<run> step <i>` on its
 * request's stream; with `pauseAfter` it waits for the gate `<run>:mid` after that many, and
 * with `holdResult` for the gate `<run>:end` before it answers `<run> done`.
 * Tool `big` answers a text of `size` characters.
 */
export class McpFixture {
  readonly stores: EventLogEventStore[] = [];
  readonly transportErrors: Error[] = [];
  readonly logbook = new Logbook();
  /** Steps sent so far, per run. */
  readonly sent = new Map<string, number>();
  /** POST responses that closed before they were finished (the client went away). */
  cutResponses = 0;
  private readonly transports = new Map<string, SessionTransport>();
  private readonly gates = new Map<string, Gate>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly sdk: Sdk,
  ) {}

  static async start(
    storeOptions: EventLogEventStoreOptions,
    sdk: Sdk = "v1",
  ): Promise<McpFixture> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    const address = server.address();
    const port = typeof address === "object" && address !== null ? address.port : 0;
    const fixture = new McpFixture(server, `http://127.0.0.1:${port}/mcp`, sdk);
    const serve = sdk === "v1" ? fixture.serverV1(storeOptions) : fixture.serverV2(storeOptions);
    server.on("request", (req: IncomingMessage, res: ServerResponse) => {
      if (req.method === "POST") {
        res.on("close", () => {
          if (!res.writableEnded) fixture.cutResponses += 1;
        });
      }
      serve(req, res).catch((error: unknown) => {
        fixture.transportErrors.push(error instanceof Error ? error : new Error(String(error)));
        if (!res.headersSent) res.writeHead(500).end();
      });
    });
    return fixture;
  }

  gate(name: string): Gate {
    let gate = this.gates.get(name);
    if (gate === undefined) {
      gate = new Gate();
      this.gates.set(name, gate);
    }
    return gate;
  }

  async close(): Promise<void> {
    for (const transport of this.transports.values()) await transport.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private store(options: EventLogEventStoreOptions): EventLogEventStore {
    const store = new EventLogEventStore({ logger: this.logbook, ...options });
    this.stores.push(store);
    return store;
  }

  /**
   * A new session: its store, and its transport (`make`, given the options both generations'
   * transports take) attached to the store, known by its id once the SDK gives it one, its
   * errors collected, connected to a server (`connect`).
   */
  private async session<T extends SessionTransport>(
    storeOptions: EventLogEventStoreOptions,
    make: (options: SessionOptions) => T,
    connect: (transport: T) => Promise<void>,
  ): Promise<T> {
    const store = this.store(storeOptions);
    const created: T = store.attach(
      make({
        sessionIdGenerator: randomUUID,
        eventStore: store,
        retryInterval: 100,
        onsessioninitialized: (id) => {
          this.transports.set(id, created);
        },
      }),
    );
    created.onerror = (error) => this.transportErrors.push(error);
    await connect(created);
    return created;
  }

  /** SDK 1.x: one `StreamableHTTPServerTransport` and one store per session. */
  private serverV1(
    storeOptions: EventLogEventStoreOptions,
  ): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
    return async (req, res) => {
      const sessionId = req.headers["mcp-session-id"];
      let transport = typeof sessionId === "string" ? this.transports.get(sessionId) : undefined;
      if (transport === undefined && sessionId !== undefined) {
        res.writeHead(404).end();
        return;
      }
      transport ??= await this.session(
        storeOptions,
        (options) => new StreamableHTTPServerTransport(options),
        (created) => this.mcpServerV1().connect(created),
      );
      await (transport as StreamableHTTPServerTransport).handleRequest(req, res);
    };
  }

  /** SDK 2.x: legacy requests to a sessionful web-standard transport, the rest modern. */
  private serverV2(
    storeOptions: EventLogEventStoreOptions,
  ): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
    const modern = createMcpHandler(() => this.mcpServerV2(), { legacy: "reject" });
    const legacy = async (request: Request): Promise<Response> => {
      const sessionId = request.headers.get("mcp-session-id");
      let transport = sessionId === null ? undefined : this.transports.get(sessionId);
      if (transport === undefined && sessionId !== null) return new Response(null, { status: 404 });
      transport ??= await this.session(
        storeOptions,
        (options) => new WebStandardStreamableHTTPServerTransport(options),
        (created) => this.mcpServerV2().connect(created),
      );
      return (transport as WebStandardStreamableHTTPServerTransport).handleRequest(request);
    };
    const fetch = async (request: Request): Promise<Response> =>
      (await isLegacyRequest(request)) ? legacy(request) : modern.fetch(request);
    const listener = getRequestListener(fetch);
    return async (req, res) => listener(req, res);
  }

  private async steps({ run, count, pauseAfter, holdResult }: StepsArgs, notify: Notify) {
    for (let i = 1; i <= count; i += 1) {
      if (pauseAfter !== undefined && i === pauseAfter + 1) await this.gate(`${run}:mid`).opened;
      await notify(`${run} step ${i}`);
      this.sent.set(run, i);
    }
    if (holdResult) await this.gate(`${run}:end`).opened;
    return { content: [{ type: "text" as const, text: `${run} done` }] };
  }

  private static big(size: number) {
    return { content: [{ type: "text" as const, text: "é".repeat(Math.floor(size / 2)) }] };
  }

  private mcpServerV1(): McpServerV1 {
    const server = new McpServerV1(
      { name: "eventlog-fixture", version: "1.0.0" },
      { capabilities: { logging: {} } },
    );
    server.registerTool("steps", { inputSchema: STEPS_SHAPE }, (args, extra) =>
      this.steps(args, (data) =>
        extra.sendNotification({
          method: "notifications/message",
          params: { level: "info", data },
        }),
      ),
    );
    server.registerTool("big", { inputSchema: BIG_SHAPE }, async ({ size }) =>
      McpFixture.big(size),
    );
    return server;
  }

  private mcpServerV2(): McpServerV2 {
    const server = new McpServerV2(
      { name: "eventlog-fixture", version: "2.0.0" },
      { capabilities: { logging: {} } },
    );
    server.registerTool("steps", { inputSchema: z.object(STEPS_SHAPE) }, (args, ctx) =>
      this.steps(args, (data) =>
        ctx.mcpReq.notify({ method: "notifications/message", params: { level: "info", data } }),
      ),
    );
    server.registerTool("big", { inputSchema: z.object(BIG_SHAPE) }, async ({ size }) =>
      McpFixture.big(size),
    );
    return server;
  }
}

const STEPS_SHAPE = {
  run: z.string(),
  count: z.number().int(),
  pauseAfter: z.number().int().optional(),
  holdResult: z.boolean().optional(),
};
const BIG_SHAPE = { size: z.number().int() };

/** A `fetch` for the SDK client that can cut its open POST streams, hold back its
 *  resumptions (GETs with `Last-Event-ID`) and rewrite the id they carry. */
export class Cutter {
  /** `Last-Event-ID`s the client sent, in order (after any rewrite). */
  readonly resumedFrom: string[] = [];
  /** Statuses of the answers to those resumptions, in order. */
  readonly resumeStatuses: number[] = [];
  /** The SSE bodies of those answers as far as they came, in order. */
  readonly resumeBodies: string[] = [];
  holdResumes: Gate | undefined;
  rewrite: ((lastEventId: string) => string) | undefined;
  private readonly open = new Set<AbortController>();

  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const headers = new Headers(init?.headers);
    const lastEventId = headers.get("last-event-id");
    if (lastEventId !== null) {
      const sent = this.rewrite?.(lastEventId) ?? lastEventId;
      headers.set("last-event-id", sent);
      this.resumedFrom.push(sent);
      await this.holdResumes?.opened;
    }
    const controller = new AbortController();
    const signal = init?.signal
      ? AbortSignal.any([init.signal, controller.signal])
      : controller.signal;
    let response = await fetch(input, { ...init, headers, signal });
    if (lastEventId !== null) {
      this.resumeStatuses.push(response.status);
      response = this.copyBody(response);
    }
    if (
      (init?.method ?? "GET") === "POST" &&
      response.headers.get("content-type")?.startsWith("text/event-stream")
    ) {
      this.open.add(controller);
    }
    return response;
  };

  /** `response` with the same body, a copy of which is kept in `resumeBodies`. */
  private copyBody(response: Response): Response {
    if (response.body === null) return response;
    const [forClient, copy] = response.body.tee();
    const index = this.resumeBodies.push("") - 1;
    void (async () => {
      const decoder = new TextDecoder();
      try {
        for await (const chunk of copy) this.resumeBodies[index] += decoder.decode(chunk);
      } catch {
        // the connection was cut: what came is kept
      }
    })();
    const { status, statusText, headers } = response;
    return new Response(forClient, { status, statusText, headers });
  }

  /** Cut every POST stream opened so far, as a network failure would. */
  cut(): void {
    for (const controller of this.open) controller.abort(new Error("cut by the test"));
    this.open.clear();
  }
}

/** How a call ended, the same for either client generation. */
export type CallOutcome =
  | { readonly kind: "result"; readonly text: string }
  | { readonly kind: "error"; readonly code: number; readonly data: unknown }
  | { readonly kind: "timeout" }
  | { readonly kind: "other"; readonly error: unknown };

/** Options of one tool call. */
export interface CallOptions {
  readonly timeout?: number;
  /** Resume the call from this token (a new request whose answer is the old one's). */
  readonly resumptionToken?: string;
  readonly onresumptiontoken?: (token: string) => void;
}

/** An SDK client of either generation, with what it received. */
export interface TestClient {
  readonly sdk: Sdk;
  readonly cutter: Cutter;
  /** The data of every log notification received, in order. */
  readonly notes: string[];
  /** Everything the client's `onerror` saw. */
  readonly errors: Error[];
  readonly sessionId: string | undefined;
  /** Call a tool; settles with how the call ended. */
  call(name: string, args: Record<string, unknown>, options?: CallOptions): Promise<CallOutcome>;
  /** Close the transport only (the session stays on the server). */
  closeTransport(): Promise<void>;
  close(): Promise<void>;
}

const RECONNECTION = {
  initialReconnectionDelay: 100,
  maxReconnectionDelay: 1_000,
  reconnectionDelayGrowFactor: 1.5,
  maxRetries: 20,
};

/** Connect an SDK client (a new session, or an existing one by `sessionId`). */
export async function connectClient(
  url: string,
  options: { sdk?: Sdk; sessionId?: string | undefined } = {},
): Promise<TestClient> {
  return options.sdk === "v2"
    ? connectV2(url, options.sessionId)
    : connectV1(url, options.sessionId);
}

async function connectV1(url: string, sessionId: string | undefined): Promise<TestClient> {
  const cutter = new Cutter();
  const transport = new ClientTransportV1(new URL(url), {
    fetch: cutter.fetch,
    reconnectionOptions: RECONNECTION,
    ...(sessionId === undefined ? {} : { sessionId }),
  });
  const client = new ClientV1({ name: "eventlog-test-client", version: "1.0.0" });
  const notes: string[] = [];
  const errors: Error[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    notes.push(String(notification.params.data));
  });
  client.onerror = (error) => errors.push(error);
  await client.connect(transport);
  return testClient({
    sdk: "v1",
    cutter,
    notes,
    errors,
    transport,
    callTool: (params, options) =>
      client.request({ method: "tools/call", params }, CallToolResultSchema, options),
    close: () => client.close(),
  });
}

async function connectV2(url: string, sessionId: string | undefined): Promise<TestClient> {
  const cutter = new Cutter();
  const transport = new ClientTransportV2(new URL(url), {
    fetch: cutter.fetch,
    reconnectionOptions: RECONNECTION,
    ...(sessionId === undefined ? {} : { sessionId }),
  });
  const client = new ClientV2({ name: "eventlog-test-client", version: "2.0.0" });
  const notes: string[] = [];
  const errors: Error[] = [];
  client.setNotificationHandler("notifications/message", (notification) => {
    notes.push(String(notification.params.data));
  });
  client.onerror = (error) => errors.push(error);
  await client.connect(transport);
  return testClient({
    sdk: "v2",
    cutter,
    notes,
    errors,
    transport,
    callTool: (params, options) => client.request({ method: "tools/call", params }, options),
    close: () => client.close(),
  });
}

/** What a `TestClient` is made of, whichever generation's client it wraps. */
interface Connected {
  readonly sdk: Sdk;
  readonly cutter: Cutter;
  readonly notes: string[];
  readonly errors: Error[];
  readonly transport: { readonly sessionId?: string | undefined; close(): Promise<void> };
  readonly callTool: (
    params: { name: string; arguments: Record<string, unknown> },
    options: CallOptions & { readonly timeout: number },
  ) => Promise<unknown>;
  readonly close: () => Promise<void>;
}

function testClient(connected: Connected): TestClient {
  const { sdk, cutter, notes, errors, transport, callTool, close } = connected;
  return {
    sdk,
    cutter,
    notes,
    errors,
    get sessionId() {
      return transport.sessionId;
    },
    call: (name, args, options = {}) =>
      outcomeOf(
        callTool({ name, arguments: args }, { ...options, timeout: options.timeout ?? 60_000 }),
      ),
    closeTransport: () => transport.close(),
    close,
  };
}

/** How `call` ended, whichever generation's client made it. */
export async function outcomeOf(call: Promise<unknown>): Promise<CallOutcome> {
  try {
    const result = CallToolResultSchema.parse(await call);
    const first = result.content[0];
    return { kind: "result", text: first?.type === "text" ? first.text : "" };
  } catch (error) {
    if (error instanceof McpError && error.code === -32001) return { kind: "timeout" };
    if (error instanceof SdkError && error.code === "REQUEST_TIMEOUT") return { kind: "timeout" };
    if (error instanceof McpError || error instanceof ProtocolError) {
      return { kind: "error", code: error.code, data: error.data };
    }
    return { kind: "other", error };
  }
}

/** `count` step names of a run, from `from`. */
export function steps(run: string, from: number, to: number): string[] {
  return Array.from({ length: to - from + 1 }, (_, i) => `${run} step ${from + i}`);
}
