// The official TypeScript MCP servers with NO event store, as the gateway's upstreams:
// `node server.mjs <sdk> <port>`, where <sdk> is `v1` (@modelcontextprotocol/sdk 1.x,
// StreamableHTTPServerTransport on node:http) or `v2` (@modelcontextprotocol/server 2.x,
// the legacy session path: WebStandardStreamableHTTPServerTransport with a session id
// generator, one transport per session).
//
// Its one tool, `progress`, is the upstream contract of tests/support/upstreams: arguments
// `n` (steps), `delay` (seconds paused before each step), `pad` (characters added to each
// step's message) and `result_bytes` (a result text of that size); it sends progress
// 1..n (total n, message "step i") for the request's progress token, then returns the text
// "counted to n".
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { z } from 'zod';

const [sdk, portText] = process.argv.slice(2);
const port = Number(portText);

const inputSchema = {
  n: z.number().int(),
  delay: z.number().optional(),
  pad: z.number().int().optional(),
  result_bytes: z.number().int().optional(),
};

function resultText(args) {
  if (!args.result_bytes) return `counted to ${args.n}`;
  const line = 'result line \u2713 0123456789 abcdefghijklmnopqrstuvwxyz\n';
  return line.repeat(Math.ceil(args.result_bytes / line.length) + 1).slice(0, args.result_bytes);
}

// Progress 1..n through `notify`, then the result; the same body for both generations.
async function progress(args, progressToken, notify) {
  const padding = 'x'.repeat(args.pad ?? 0);
  for (let step = 1; step <= args.n; step++) {
    if (args.delay) await new Promise((resolve) => setTimeout(resolve, args.delay * 1000));
    if (progressToken !== undefined) {
      await notify({
        method: 'notifications/progress',
        params: { progressToken, progress: step, total: args.n, message: `step ${step}${padding}` },
      });
    }
  }
  return { content: [{ type: 'text', text: resultText(args) }] };
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks);
}

async function v1() {
  const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
  const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  const { isInitializeRequest } = await import('@modelcontextprotocol/sdk/types.js');
  const transports = new Map();
  return async (req, res) => {
    const sessionId = req.headers['mcp-session-id'];
    const raw = req.method === 'POST' ? await readBody(req) : undefined;
    const body = raw?.length ? JSON.parse(raw.toString()) : undefined;
    let transport = sessionId ? transports.get(sessionId) : undefined;
    if (transport === undefined && !sessionId && req.method === 'POST' && isInitializeRequest(body)) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      const server = new McpServer({ name: 'ts-v1-upstream', version: '0.0.0' });
      server.registerTool('progress', { inputSchema }, (args, extra) =>
        progress(args, extra._meta?.progressToken, extra.sendNotification),
      );
      await server.connect(transport);
    }
    if (transport === undefined) {
      res.writeHead(sessionId ? 404 : 400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'no such session' }, id: null }));
      return;
    }
    await transport.handleRequest(req, res, body);
  };
}

async function v2() {
  const { McpServer, WebStandardStreamableHTTPServerTransport } = await import('@modelcontextprotocol/server');
  const transports = new Map();
  const handle = async (request, sessionId, body) => {
    let transport = sessionId ? transports.get(sessionId) : undefined;
    if (transport === undefined && !sessionId && request.method === 'POST' && body?.method === 'initialize') {
      transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      const server = new McpServer({ name: 'ts-v2-upstream', version: '0.0.0' });
      server.registerTool('progress', { inputSchema: z.object(inputSchema) }, (args, ctx) =>
        progress(args, ctx.mcpReq._meta?.progressToken, ctx.mcpReq.notify),
      );
      await server.connect(transport);
    }
    if (transport === undefined) {
      const error = { jsonrpc: '2.0', error: { code: -32000, message: 'no such session' }, id: null };
      return Response.json(error, { status: sessionId ? 404 : 400 });
    }
    return transport.handleRequest(request, { parsedBody: body });
  };
  // node:http <-> Web Request/Response, the body relayed chunk by chunk as it is produced.
  return async (req, res) => {
    const raw = req.method === 'POST' ? await readBody(req) : undefined;
    const body = raw?.length ? JSON.parse(raw.toString()) : undefined;
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
    }
    const controller = new AbortController();
    res.on('close', () => controller.abort());
    const request = new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url}`, {
      method: req.method,
      headers,
      body: raw?.length ? raw : undefined,
      signal: controller.signal,
    });
    const response = await handle(request, req.headers['mcp-session-id'], body);
    res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
    res.flushHeaders();
    if (response.body === null) {
      res.end();
      return;
    }
    const reader = response.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        res.write(value);
      }
    } catch {
      // the client left: the transport sees the abort
    } finally {
      res.end();
    }
  };
}

const handler = sdk === 'v1' ? await v1() : sdk === 'v2' ? await v2() : undefined;
if (handler === undefined) throw new Error(`unknown SDK generation ${sdk}`);
createServer((req, res) => {
  if (!req.url.startsWith('/mcp')) {
    res.writeHead(404).end();
    return;
  }
  handler(req, res).catch((error) => {
    console.error(error);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
}).listen(port, '127.0.0.1', () => console.error(`ts ${sdk} upstream on ${port}`));
