"""The gateway: durable, verdict-checked resumability in front of any MCP server.

`mcp-eventlog gateway --upstream URL` serves everything `serve` serves plus an MCP
endpoint forwarded to `URL` (CONTRACT.md, "Gateway"; docs/gateway.md). Its pieces, one job
each:

- `names`: the stores' stream-name convention and the session scope (a keyed hash);
- `sse`: Server-Sent Events parsed incrementally and written;
- `messages`: what a JSON-RPC message is stored as, and the gateway's own errors;
- `upstream`: the HTTP client of the upstream (headers forwarded, streaming, timeouts);
- `recorder`: appends a stream's messages in batches, each relayed only once stored;
- `recording`: one recorded SSE response, read from the upstream to its end;
- `resume`: a `Last-Event-ID` reconnect answered from the log;
- `endpoint`: the MCP endpoint itself (POST, GET, DELETE; revisions);
- `task_spec`, `task_wire`, `task_calls`, `task_host`, `task_worker`, `task_listen`: the
  task host of `io.modelcontextprotocol/tasks` for the tools `--tasks` names (docs/tasks.md):
  which tools, the extension's wire shapes, one upstream request read to its answer, the
  extension's methods, the call run as a task, `notifications/tasks` on listen streams;
- `metrics`: the gateway's counters on the service's registry;
- `app`: the application factory (`create_gateway_app`).
"""
