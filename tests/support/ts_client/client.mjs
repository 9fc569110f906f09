// The official TypeScript MCP client (@modelcontextprotocol/sdk, pinned in package-lock.json),
// driven by pytest against a Python MCP server: `node client.mjs <url> <program.json>`.
//
// The program is a JSON list of operations, run in order on one MCP session:
//   {"op": "call", "arguments": {...}, "timeout_ms": N, "drop_after_tokens": K?}
//       call the `progress` tool on the session's own client (the session is opened by the
//       first call). The transport reconnects by itself with Last-Event-ID when the server
//       closes the stream. With `drop_after_tokens`, the client drops the connection once
//       it holds K resumption tokens (the transport is closed, the session stays).
//   {"op": "resume", "token": "<id>" | {"call": i, "index": j}, "timeout_ms": N}
//       a new client on the same session resumes with a resumption token: the literal id,
//       or token j (negative: from the end) of operation i.
//   {"op": "wait"}
//       wait for a line on standard input (the test's go-ahead).
// Every observation is printed at once as one JSON line: {"op": i, "event": ..., ...}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';

const input = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const [url, programJson] = process.argv.slice(2);
const program = JSON.parse(programJson);
const tokens = program.map(() => []);
const started = Date.now();
let sessionId;
let main;

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
  print(op, 'error', { code: error?.code ?? null, message: String(error?.message ?? error), data: error?.data ?? null });
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
    outcome(op, await main.client.request(request, CallToolResultSchema, options(op, spec, { onToken })));
  } catch (error) {
    failure(op, error);
  }
}

async function resume(op, spec) {
  const token = typeof spec.token === 'string' ? spec.token : tokens[spec.token.call].at(spec.token.index);
  const { client, transport } = connect(op, true);
  await client.connect(transport);
  const request = { method: 'tools/call', params: { name: 'progress', arguments: { n: 0 } } };
  print(op, 'resuming', { token });
  try {
    const result = await client.request(request, CallToolResultSchema, options(op, spec, { options: { resumptionToken: token } }));
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
    await input.next();
  }
  else throw new Error(`unknown op ${spec.op}`);
}
if (main !== undefined) {
  await main.transport.terminateSession().catch(() => {});
  await main.transport.close();
}
print(program.length, 'exit');
process.exit(0);
