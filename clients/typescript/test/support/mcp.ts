/**
 * A real MCP server (the TypeScript SDK's McpServer + StreamableHTTPServerTransport, one
 * `EventLogEventStore` per session, wired as the docs say) and SDK clients whose connections
 * a test can cut, hold back or tamper with.
 */

import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

import {
  EventLogEventStore,
  type EventLogEventStoreOptions,
  type StoreLogger,
} from "../../src/index.js";
import { Gate } from "./wait.js";

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
  private readonly transports = new Map<string, StreamableHTTPServerTransport>();
  private readonly gates = new Map<string, Gate>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(storeOptions: EventLogEventStoreOptions): Promise<McpFixture> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    const address = server.address();
    const port = typeof address === "object" && address !== null ? address.port : 0;
    const fixture = new McpFixture(server, `http://127.0.0.1:${port}/mcp`);
    server.on("request", (req, res) => {
      fixture.serve(storeOptions, req, res).catch((error: unknown) => {
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

  private async serve(
    storeOptions: EventLogEventStoreOptions,
    req: import("node:http").IncomingMessage,
    res: import("node:http").ServerResponse,
  ): Promise<void> {
    const sessionId = req.headers["mcp-session-id"];
    let transport = typeof sessionId === "string" ? this.transports.get(sessionId) : undefined;
    if (transport === undefined) {
      if (sessionId !== undefined) {
        res.writeHead(404).end();
        return;
      }
      transport = await this.newSession(storeOptions);
    }
    if (req.method === "POST") {
      res.on("close", () => {
        if (!res.writableEnded) this.cutResponses += 1;
      });
    }
    await transport.handleRequest(req, res);
  }

  /** One session: its own store, attached to its own transport (the documented wiring). */
  private async newSession(
    storeOptions: EventLogEventStoreOptions,
  ): Promise<StreamableHTTPServerTransport> {
    const store = new EventLogEventStore({ logger: this.logbook, ...storeOptions });
    this.stores.push(store);
    const transport: StreamableHTTPServerTransport = store.attach(
      new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        eventStore: store,
        retryInterval: 100,
        onsessioninitialized: (id) => {
          this.transports.set(id, transport);
        },
      }),
    );
    transport.onerror = (error) => this.transportErrors.push(error);
    await this.mcpServer().connect(transport);
    return transport;
  }

  private mcpServer(): McpServer {
    const server = new McpServer(
      { name: "eventlog-fixture", version: "1.0.0" },
      { capabilities: { logging: {} } },
    );
    server.registerTool(
      "steps",
      {
        inputSchema: {
          run: z.string(),
          count: z.number().int(),
          pauseAfter: z.number().int().optional(),
          holdResult: z.boolean().optional(),
        },
      },
      async ({ run, count, pauseAfter, holdResult }, extra) => {
        for (let i = 1; i <= count; i += 1) {
          if (pauseAfter !== undefined && i === pauseAfter + 1)
            await this.gate(`${run}:mid`).opened;
          await extra.sendNotification({
            method: "notifications/message",
            params: { level: "info", data: `${run} step ${i}` },
          });
          this.sent.set(run, i);
        }
        if (holdResult) await this.gate(`${run}:end`).opened;
        return { content: [{ type: "text", text: `${run} done` }] };
      },
    );
    server.registerTool("big", { inputSchema: { size: z.number().int() } }, async ({ size }) => ({
      content: [{ type: "text", text: "é".repeat(Math.floor(size / 2)) }],
    }));
    return server;
  }
}

/** A `fetch` for the SDK client that can cut its open POST streams, hold back its
 *  resumptions (GETs with `Last-Event-ID`) and rewrite the id they carry. */
export class Cutter {
  /** `Last-Event-ID`s the client sent, in order (after any rewrite). */
  readonly resumedFrom: string[] = [];
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
    const response = await fetch(input, { ...init, headers, signal });
    if (
      (init?.method ?? "GET") === "POST" &&
      response.headers.get("content-type")?.startsWith("text/event-stream")
    ) {
      this.open.add(controller);
    }
    return response;
  };

  /** Cut every POST stream opened so far, as a network failure would. */
  cut(): void {
    for (const controller of this.open) controller.abort(new Error("cut by the test"));
    this.open.clear();
  }
}

/** An SDK client of the fixture, with what it received. */
export interface TestClient {
  readonly client: Client;
  readonly transport: StreamableHTTPClientTransport;
  readonly cutter: Cutter;
  /** The data of every log notification received, in order. */
  readonly notes: string[];
  /** Everything the client's `onerror` saw. */
  readonly errors: Error[];
}

/** Connect an SDK client (a new session, or an existing one by `sessionId`). */
export async function connectClient(url: string, sessionId?: string): Promise<TestClient> {
  const cutter = new Cutter();
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    fetch: cutter.fetch,
    reconnectionOptions: {
      initialReconnectionDelay: 100,
      maxReconnectionDelay: 1_000,
      reconnectionDelayGrowFactor: 1.5,
      maxRetries: 20,
    },
    ...(sessionId === undefined ? {} : { sessionId }),
  });
  const client = new Client({ name: "eventlog-test-client", version: "1.0.0" });
  const notes: string[] = [];
  const errors: Error[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    notes.push(String(notification.params.data));
  });
  client.onerror = (error) => errors.push(error);
  await client.connect(transport);
  return { client, transport, cutter, notes, errors };
}

/** `count` step names of a run, from `from`. */
export function steps(run: string, from: number, to: number): string[] {
  return Array.from({ length: to - from + 1 }, (_, i) => `${run} step ${from + i}`);
}
