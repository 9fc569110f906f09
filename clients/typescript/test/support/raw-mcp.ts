/** One JSON-RPC request to a 2026-07-28 MCP server sent by hand, as a client that declares the
 *  tasks extension would send it (its headers and `_meta`), for what an SDK client never sends. */

import { TASKS_EXTENSION } from "../../src/index.js";

/** The stateless revision the tasks extension's servers speak. */
export const MCP_VERSION = "2026-07-28";

export interface RawRequest {
  readonly id: number;
  readonly method: string;
  /** The `Mcp-Name` header (the tool, or the task, the request is about). */
  readonly mcpName: string;
  readonly params: Record<string, unknown>;
}

/** POST `request` to `url`; the answer's JSON text, from a JSON answer or the first `data:`
 *  line of an event stream. */
export async function rawMcpPost(url: string | URL, request: RawRequest): Promise<string> {
  const response = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": MCP_VERSION,
      "mcp-method": request.method,
      "mcp-name": request.mcpName,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: request.id,
      method: request.method,
      params: {
        ...request.params,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
          "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
          "io.modelcontextprotocol/clientCapabilities": { extensions: { [TASKS_EXTENSION]: {} } },
        },
      },
    }),
  });
  const text = await response.text();
  if (text.startsWith("{")) return text;
  return (
    text
      .split("\n")
      .find((line) => line.startsWith("data:"))
      ?.slice(5) ?? text
  );
}
