/**
 * A hostile fake of the service, as a program of its own (`node hostile-server.js`): what a
 * mistyped `EVENTLOG_URL`, a captive proxy or a broken middlebox answers. The first path
 * segment picks the misbehaviour, so a client pointed at `http://<host>/<mode>` meets it on
 * every call:
 *
 * - `html`: 200 `text/html`; `json-html`: 200 "application/json" whose bytes are HTML;
 *   `fields`: 200 JSON missing every field; `latin1`: 200 JSON that is not UTF-8;
 * - `drip`: 200 JSON, one byte a second, for ever; `huge`: 200 JSON that never ends;
 *   `gzip`: 200 JSON, `Content-Encoding: gzip`, 16 MiB of zeros per 16 KiB sent, for ever;
 * - `redirect-307`, `redirect-302`: a redirect to the same path on another host (127.0.0.2),
 *   where a recorder answers every request as the service would and records what it got;
 * - `sse-endless`: a live stream whose first line never ends; `sse-garbage`: a live stream of
 *   malformed frames; `sse-silent`: a live stream that says nothing after `retry:`;
 *   `sse-html`: a live route answering HTML.
 *
 * - append channel (`GET /v1/append`, a WebSocket) misbehaviours, with every HTTP call of the
 *   mode answered as the service would (so a store gets as far as appending): `ws-garbage`
 *   answers each frame with text that is not JSON; `ws-wrong-id` with another frame's id;
 *   `ws-fields` with an answer missing every field; `ws-binary` with a binary frame;
 *   `ws-huge` with a 2 MiB text frame; `ws-silent` never answers; `ws-close` closes the
 *   channel (1011) on each frame; `ws-redirect` answers the upgrade with a 307 to the
 *   recorder; `ws-refuse` answers it 404 like a service without the channel.
 *
 * It prints one JSON line when listening: `{"port", "recorderPort"}`. `GET /_state` answers
 * `{"received": [{method, path, body}], "sent": {<mode>: bytes written}}`.
 */

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { gzipSync } from "node:zlib";

import { type RawData, type WebSocket, WebSocketServer } from "ws";

const received: { method: string; path: string; body: string }[] = [];
const sent = new Map<string, number>();
const GZIP_MEMBER = gzipSync(Buffer.alloc(16 * 1_048_576));
const CHUNK = Buffer.alloc(64 * 1024, " ");

function count(mode: string, bytes: number): void {
  sent.set(mode, (sent.get(mode) ?? 0) + bytes);
}

/** Write `next()` chunks while the client reads, until it goes away. */
function pour(res: ServerResponse, mode: string, next: () => Buffer): void {
  const write = (): void => {
    while (!res.destroyed) {
      const chunk = next();
      count(mode, chunk.length);
      if (!res.write(chunk)) {
        res.once("drain", write);
        return;
      }
    }
  };
  write();
}

function drip(res: ServerResponse, mode: string, byte: string): void {
  const timer = setInterval(() => {
    if (res.destroyed) {
      clearInterval(timer);
      return;
    }
    count(mode, 1);
    res.write(byte);
  }, 1_000);
  res.on("close", () => clearInterval(timer));
}

function serveMode(
  mode: string,
  req: IncomingMessage,
  res: ServerResponse,
  recorder: string,
): void {
  const json = { "content-type": "application/json" };
  switch (mode) {
    case "html":
      res.writeHead(200, { "content-type": "text/html" }).end("<html>Please sign in</html>");
      return;
    case "json-html":
      res.writeHead(200, json).end("<html>Please sign in</html>");
      return;
    case "fields":
      res.writeHead(200, json).end('{"ok": true}');
      return;
    case "latin1":
      res.writeHead(200, json).end(Buffer.from([0x7b, 0x22, 0xe9, 0x22, 0x7d]));
      return;
    case "drip":
      res.writeHead(200, json);
      res.write("{");
      drip(res, mode, " ");
      return;
    case "huge":
      res.writeHead(200, json);
      pour(res, mode, () => CHUNK);
      return;
    case "gzip":
      res.writeHead(200, { ...json, "content-encoding": "gzip" });
      pour(res, mode, () => GZIP_MEMBER);
      return;
    case "redirect-307":
    case "redirect-302": {
      const rest = (req.url ?? "/").slice(mode.length + 1);
      res.writeHead(Number(mode.slice(-3)), { location: `${recorder}${rest}` }).end();
      return;
    }
    case "sse-endless":
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: ");
      pour(res, mode, () => Buffer.alloc(64 * 1024, "x"));
      return;
    case "sse-garbage":
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(
        "event: mcp-server-event\nid: t:1\ndata: {not json\n\n" +
          'event: mcp-server-event\nid: t:2\ndata: {"method": 7}\n\n' +
          'event: mcp-server-event\nid: t:3\ndata: {"method": "notifications/unknown"}\n\n' +
          "event: reset\ndata: [1, 2\n\n",
      );
      drip(res, mode, ":");
      return;
    case "sse-silent":
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("retry: 1000\n");
      return;
    case "sse-html":
      res.writeHead(200, { "content-type": "text/html" }).end("<html>Please sign in</html>");
      return;
    default:
      res.writeHead(404, { "content-type": "text/plain" }).end(`no mode ${mode}`);
  }
}

/** Answers as the service would: a generation to an open, an acknowledgement to an append
 *  (recorded in `received` unless `keep` is false). */
function record(req: IncomingMessage, res: ServerResponse, keep = true): void {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    const path = req.url ?? "/";
    const body = Buffer.concat(chunks).toString();
    if (keep) received.push({ method: req.method ?? "GET", path, body });
    const answer = path.endsWith("/generations")
      ? {
          stream_id: "taken",
          generation: "RECORDERRECORDERRECORD",
          epoch: 1,
          reason: "initial",
          producer: null,
          head_seq: 1,
          tail_seq: 0,
          terminal: false,
          terminal_seq: null,
          created_at: "2026-01-01T00:00:00Z",
          supersedes: null,
        }
      : {
          generation: "RECORDERRECORDERRECORD",
          event_ids: ["RECORDERRECORDERRECORD:1"],
          head_seq: 1,
          tail_seq: 1,
          terminal: false,
          duplicate: false,
        };
    res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify(answer));
  });
}

async function listen(server: ReturnType<typeof createServer>, host: string): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, host, () => resolve()));
  const address = server.address();
  return typeof address === "object" && address !== null ? address.port : 0;
}

/** One append channel misbehaving as `mode` says. */
function channel(mode: string, ws: WebSocket): void {
  ws.on("message", (data: RawData) => {
    count(mode, 1);
    let id: unknown = null;
    try {
      id = (JSON.parse(String(data)) as { id?: unknown }).id ?? null;
    } catch {
      // answered the same way
    }
    switch (mode) {
      case "ws-garbage":
        ws.send("{not json");
        return;
      case "ws-wrong-id":
        ws.send(JSON.stringify({ id: `not-${String(id)}`, status: 201 }));
        return;
      case "ws-fields":
        ws.send(JSON.stringify({ id, status: 201 }));
        return;
      case "ws-binary":
        ws.send(Buffer.from(JSON.stringify({ id, status: 201 })), { binary: true });
        return;
      case "ws-huge":
        ws.send(`{"id": ${JSON.stringify(id)}, "x": "${"x".repeat(2 * 1_048_576)}"}`);
        return;
      case "ws-close":
        ws.close(1011, "going away");
        return;
      default: // ws-silent
        return;
    }
  });
}

const channels = new WebSocketServer({ noServer: true });

function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
  const mode = (req.url ?? "/").split("/")[1] ?? "";
  if (mode === "ws-redirect") {
    const rest = (req.url ?? "/").slice(mode.length + 1);
    socket.end(`HTTP/1.1 307 Temporary Redirect\r\nlocation: ${recorder}${rest}\r\n\r\n`);
    return;
  }
  if (!mode.startsWith("ws-") || mode === "ws-refuse") {
    const body = '{"code": "not_found", "detail": "no such route"}';
    socket.end(
      "HTTP/1.1 404 Not Found\r\ncontent-type: application/problem+json\r\n" +
        `content-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
    );
    return;
  }
  channels.handleUpgrade(req, socket, head, (ws) => channel(mode, ws));
}

const recorderServer = createServer(record);
recorderServer.on("upgrade", (req: IncomingMessage, socket: Duplex) => {
  received.push({ method: "UPGRADE", path: req.url ?? "/", body: "" });
  socket.destroy();
});
const recorderPort = await listen(recorderServer, "127.0.0.2");
const recorder = `http://127.0.0.2:${recorderPort}`;
const hostile = createServer((req, res) => {
  if (req.url === "/_state") {
    const state = { received, sent: Object.fromEntries(sent) };
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(state));
    return;
  }
  const mode = (req.url ?? "/").split("/")[1] ?? "";
  if (mode.startsWith("ws-")) {
    record(req, res, false);
    return;
  }
  req.resume();
  serveMode(mode, req, res, recorder);
});
hostile.on("upgrade", upgrade);
const port = await listen(hostile, "127.0.0.1");
process.stdout.write(`${JSON.stringify({ port, recorderPort })}\n`);
