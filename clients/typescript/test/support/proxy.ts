/**
 * A proxy in front of the real service that fails on demand: answers for it, drops the
 * connection, loses the service's answer, stalls, or goes down altogether (connection refused).
 *
 * WebSocket upgrades (the append channel) are tunnelled byte for byte, or refused
 * (`upgrades = "refuse"`: a proxy that cannot pass WebSockets answers 502); a tunnelled
 * channel can be cut (`dropChannels`) or have the service's frames lost on the way back
 * (`loseChannelAnswers`).
 */

import {
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from "node:http";
import { connect, type Socket } from "node:net";

export type Fault =
  | {
      readonly kind: "answer";
      readonly status: number;
      readonly body: string;
      readonly headers?: Record<string, string>;
    }
  | { readonly kind: "drop" }
  | { readonly kind: "lose-answer" }
  | { readonly kind: "stall" }
  | { readonly kind: "delay"; readonly ms: number };

type Match = (method: string, path: string) => boolean;

export class FaultyProxy {
  /** Every request that reached the proxy, in order. */
  readonly requests: { method: string; path: string }[] = [];
  private readonly queue: { fault: Fault; match: Match }[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly channels = new Set<Socket>();
  private server: Server | undefined;
  /** Tunnel WebSocket upgrades to the service, or refuse them (502). */
  upgrades: "pass" | "refuse" = "pass";
  /** Upgrades asked for, and of them tunnelled. */
  upgradesAsked = 0;
  upgradesPassed = 0;
  /** While true, what the service sends on a tunnelled channel is dropped on the floor. */
  loseChannelAnswers = false;
  /** Bytes the producers sent on tunnelled channels. */
  channelBytesIn = 0;
  /** While true, what producers send on tunnelled channels is held back (a service that
   *  reads nothing); `releaseProducerFrames` delivers it, in order. */
  holdProducerFrames = false;
  private held: { upstream: Socket; chunk: Buffer }[] = [];

  private constructor(
    private readonly target: URL,
    readonly port: number,
  ) {}

  static async start(target: string, port = 0): Promise<FaultyProxy> {
    const proxy = new FaultyProxy(new URL(target), port);
    await proxy.up();
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Apply `fault` to the next request that `match`es (every request by default). */
  inject(fault: Fault, match: Match = () => true): void {
    this.queue.push({ fault, match });
  }

  /** Count of requests so far that `match`. */
  count(match: Match = () => true): number {
    return this.requests.filter((r) => match(r.method, r.path)).length;
  }

  /** Listen (again, on the same port). */
  async up(): Promise<void> {
    const server = createServer((req, res) => this.handle(req, res));
    server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) =>
      this.tunnel(req, socket, head),
    );
    server.on("connection", (socket) => {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    if (typeof address === "object" && address !== null) {
      (this as { port: number }).port = address.port;
    }
    this.server = server;
  }

  /** Stop listening and cut every connection: the service is unreachable. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server === undefined) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  /** Cut every tunnelled channel (both ends), as a broken network would. */
  dropChannels(): void {
    for (const socket of this.channels) socket.destroy();
    this.channels.clear();
  }

  /** Stop holding producers' bytes back, and deliver what was held, in order. */
  releaseProducerFrames(): void {
    this.holdProducerFrames = false;
    for (const { upstream, chunk } of this.held.splice(0)) {
      if (!upstream.destroyed) upstream.write(chunk);
    }
  }

  /** Tunnelled channels open now. */
  get openChannels(): number {
    return this.channels.size;
  }

  private tunnel(req: IncomingMessage, socket: Socket, head: Buffer): void {
    this.upgradesAsked += 1;
    this.requests.push({ method: req.method ?? "GET", path: req.url ?? "/" });
    if (this.upgrades === "refuse") {
      socket.end(
        "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: 26\r\n" +
          "connection: close\r\n\r\n<html>Bad Gateway</html>\r\n",
      );
      return;
    }
    this.upgradesPassed += 1;
    const upstream = connect(Number(this.target.port), this.target.hostname);
    const lines = [`${req.method ?? "GET"} ${req.url ?? "/"} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i] ?? "";
      const value = name.toLowerCase() === "host" ? this.target.host : req.rawHeaders[i + 1];
      lines.push(`${name}: ${value ?? ""}`);
    }
    upstream.write(`${lines.join("\r\n")}\r\n\r\n`);
    if (head.length > 0) upstream.write(head);
    this.channels.add(socket);
    this.channels.add(upstream);
    const end = (): void => {
      socket.destroy();
      upstream.destroy();
      this.channels.delete(socket);
      this.channels.delete(upstream);
    };
    socket.on("data", (chunk: Buffer) => {
      this.channelBytesIn += chunk.length;
      if (this.holdProducerFrames || this.held.length > 0) this.held.push({ upstream, chunk });
      else upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (!this.loseChannelAnswers) socket.write(chunk);
    });
    for (const end_ of [socket, upstream]) {
      end_.on("close", end);
      end_.on("error", end);
    }
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const method = req.method ?? "GET";
    const path = req.url ?? "/";
    this.requests.push({ method, path });
    const index = this.queue.findIndex((q) => q.match(method, path));
    const fault = index < 0 ? undefined : this.queue.splice(index, 1)[0]?.fault;
    if (fault?.kind === "delay") {
      setTimeout(() => this.forward(req, res, method, path, undefined), fault.ms);
      return;
    }
    this.forward(req, res, method, path, fault);
  }

  private forward(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    path: string,
    fault: Fault | undefined,
  ): void {
    if (fault?.kind === "drop") {
      req.socket.destroy();
      return;
    }
    if (fault?.kind === "stall") {
      return; // the client's own timeout ends it
    }
    if (fault?.kind === "answer") {
      req.resume();
      res.writeHead(fault.status, { "content-type": "application/problem+json", ...fault.headers });
      res.end(fault.body);
      return;
    }
    const upstream = request(
      {
        host: this.target.hostname,
        port: this.target.port,
        method,
        path,
        headers: { ...req.headers, host: this.target.host },
      },
      (answer) => {
        if (fault?.kind === "lose-answer") {
          answer.resume();
          answer.on("end", () => req.socket.destroy());
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => req.socket.destroy());
    req.pipe(upstream);
  }
}
