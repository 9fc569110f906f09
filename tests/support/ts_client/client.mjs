// The official TypeScript MCP clients, pinned in package-lock.json, driven by pytest against a
// Python MCP server: `node client.mjs <sdk> <url> <program.json>`, where <sdk> is `v1`
// (@modelcontextprotocol/sdk 1.x) or `v2` (@modelcontextprotocol/client 2.x, which negotiates
// 2025-11-25, the newest revision with sessions and resumption, unless asked otherwise).
//
// The program is a JSON list of operations, run in order on one MCP session:
//   {"op": "call", "arguments": {...}, "timeout_ms": N, "drop_after_tokens": K?}
//       call the `progress` tool on the session's own client (the session is opened by the
//       first call). The transport reconnects by itself with Last-Event-ID when the server
//       closes the stream. With `drop_after_tokens`, the client drops the connection once
//       it holds K resumption tokens (the transport is closed, the session stays).
//   {"op": "resume", "token": "<id>" | {"call": i, "index": j} | {"given": true}, "timeout_ms": N}
//       a new client on the same session resumes with a resumption token: the literal id,
//       token j (negative: from the end) of operation i, or the token the test gave with
//       its last go-ahead.
//   {"op": "wait"}
//       wait for a line on standard input (the test's go-ahead: `go` or `go <token>`).
// Every observation is printed at once as one JSON line: {"op": i, "event": ..., ...}.
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';

const input = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const [sdk, url, programJson] = process.argv.slice(2);

// The two generations' entry points; `request` sends a tools/call the way each one takes it.
async function load(generation) {
  if (generation === 'v1') {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const { CallToolResultSchema, ProgressNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
    return {
      Client,
      StreamableHTTPClientTransport,
      request: (c, r, o) => c.request(r, CallToolResultSchema, o),
      onProgress: (c, handler) => c.setNotificationHandler(ProgressNotificationSchema, handler),
    };
  }
  if (generation === 'v2') {
    const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
    return {
      Client,
      StreamableHTTPClientTransport,
      request: (c, r, o) => c.request(r, o),
      onProgress: (c, handler) => c.setNotificationHandler('notifications/progress', handler),
    };
  }
  throw new Error(`unknown SDK generation ${generation}`);
}
const { Client, StreamableHTTPClientTransport, request: send, onProgress } = await load(sdk);

const program = JSON.parse(programJson);
const tokens = program.map(() => []);
const started = Date.now();
let sessionId;
let main;
let given;

function print(op, event, fields = {}) {
  process.stdout.write(JSON.stringify({ op, event, ms: Date.now() - started, ...fields }) + '\n');
}

function connect(op, withSession) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    sessionId: withSession ? sessionId : undefined,
    reconnectionOptions: {
      initialReconnectionDelay: 50,
      maxReconnectionDelay: 1000,
      reconnectionDelayGrowFactor: 1.5,
      maxRetries: 3,
    },
  });
  const client = new Client({ name: 'eventlog-ts-harness', version: '0.0.0' });
  client.onerror = (error) => print(op, 'onerror', { message: String(error?.message ?? error) });
  return { client, transport };
}

function outcome(op, result) {
  const text = result.content?.[0]?.text ?? '';
  print(op, 'result', {
    text: text.length > 200 ? undefined : text,
    length: text.length,
    sha256: createHash('sha256').update(text).digest('hex'),
    isError: result.isError ?? false,
  });
}

function failure(op, error) {
  print(op, 'error', {
    name: error?.name ?? null,
    code: error?.code ?? null,
    message: String(error?.message ?? error),
    data: error?.data ?? null,
  });
}

function options(op, spec, extra = {}) {
  return {
    timeout: spec.timeout_ms ?? 20000,
    onprogress: (p) => print(op, 'progress', { progress: p.progress }),
    onresumptiontoken: (token) => {
      tokens[op].push(token);
      print(op, 'token', { token });
      extra.onToken?.(tokens[op].length);
    },
    ...extra.options,
  };
}

async function call(op, spec) {
  if (main === undefined) {
    main = connect(op, false);
    await main.client.connect(main.transport);
    sessionId = main.transport.sessionId;
    print(op, 'session', { session: sessionId });
  }
  const request = { method: 'tools/call', params: { name: 'progress', arguments: spec.arguments } };
  let dropped = false;
  const onToken = (count) => {
    if (spec.drop_after_tokens !== undefined && count >= spec.drop_after_tokens && !dropped) {
      dropped = true;
      print(op, 'dropped', { token: tokens[op].at(-1) });
      // Closing the transport aborts every connection of this client; the session stays.
      main.transport.close().then(() => { main = undefined; });
    }
  };
  try {
    outcome(op, await send(main.client, request, options(op, spec, { onToken })));
  } catch (error) {
    failure(op, error);
  }
}

async function resume(op, spec) {
  const token =
    typeof spec.token === 'string' ? spec.token
    : spec.token.given ? given
    : tokens[spec.token.call].at(spec.token.index);
  const { client, transport } = connect(op, true);
  // A resumed request waits under a new id and progress token, while the replayed
  // notifications carry the original request's token: count them from the session.
  onProgress(client, (n) => print(op, 'progress', { progress: n.params.progress }));
  await client.connect(transport);
  const request = { method: 'tools/call', params: { name: 'progress', arguments: { n: 0 } } };
  print(op, 'resuming', { token });
  try {
    const result = await send(client, request, options(op, spec, { options: { resumptionToken: token } }));
    outcome(op, result);
  } catch (error) {
    failure(op, error);
  } finally {
    await transport.close();
  }
}

for (const [op, spec] of program.entries()) {
  if (spec.op === 'call') await call(op, spec);
  else if (spec.op === 'resume') await resume(op, spec);
  else if (spec.op === 'wait') {
    print(op, 'waiting');
    const line = (await input.next()).value ?? '';
    given = line.split(' ')[1] ?? given;
  }
  else throw new Error(`unknown op ${spec.op}`);
}
if (main !== undefined) {
  await main.transport.terminateSession().catch(() => {});
  await main.transport.close();
}
print(program.length, 'exit', { sdk });
process.exit(0);
