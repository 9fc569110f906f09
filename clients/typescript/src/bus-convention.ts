/**
 * How a server event is stored on a bus stream: the convention the TypeScript bus and the
 * Python one (`EventLogSubscriptionBus`) share, so that a mixed fleet shares one bus.
 *
 * - The stream is `mcp-bus.<name>` (`name` defaults to `default`).
 * - Each event is one stored event of SSE type `mcp-server-event` whose data is the compact
 *   JSON of the notification it becomes, without `jsonrpc`, `id` or `_meta`:
 *   `{"method":"notifications/resources/updated","params":{"uri":"file:///a.md"}}`,
 *   `{"method":"notifications/tools/list_changed","params":{}}`, …
 *
 * Written once in docs/stream-names.md ("The bus"); `tests/fixtures/bus-convention.json`
 * holds its cases, which both test suites read.
 */

import type { ServerEvent } from "./sdk.js";

export const BUS_STREAM_PREFIX = "mcp-bus.";
export const BUS_EVENT_TYPE = "mcp-server-event";

const NAME = /^[A-Za-z0-9._~:@=+-]{1,240}$/;

const METHODS = {
  tools_list_changed: "notifications/tools/list_changed",
  prompts_list_changed: "notifications/prompts/list_changed",
  resources_list_changed: "notifications/resources/list_changed",
  resource_updated: "notifications/resources/updated",
} as const satisfies Record<ServerEvent["kind"], string>;

const KINDS = new Map<string, ServerEvent["kind"]>(
  Object.entries(METHODS).map(([kind, method]) => [method, kind as ServerEvent["kind"]]),
);

/** The stream id of the bus `name`. Throws for a name outside the stream id alphabet. */
export function busStreamId(name = "default"): string {
  // "." and ".." are refused as the Python bus refuses them: clients that normalise paths
  // cannot reach such a stream.
  if (!NAME.test(name) || name === "." || name === "..") {
    throw new RangeError(`a bus name is 1-240 characters of A-Z a-z 0-9 . _ ~ : @ = + -`);
  }
  return BUS_STREAM_PREFIX + name;
}

/** The stored data of `event`: the notification it becomes, as compact JSON. */
export function encodeServerEvent(event: ServerEvent): string {
  const { _meta: _ignored, ...params } = event.params ?? {};
  if (event.kind === "resource_updated") {
    const { uri: _replaced, ...rest } = params;
    return JSON.stringify({ method: METHODS[event.kind], params: { uri: event.uri, ...rest } });
  }
  return JSON.stringify({ method: METHODS[event.kind], params });
}

/**
 * The server event a stored event's data stands for, or a reason it stands for none (not
 * JSON, not an object, a method that is not one of the four, a `resources/updated` without
 * a string `uri`).
 */
export function decodeServerEvent(data: string): ServerEvent | string {
  let body: unknown;
  try {
    body = JSON.parse(data);
  } catch {
    return "not JSON";
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return "not an object";
  const { method, params } = body as { method?: unknown; params?: unknown };
  const kind = typeof method === "string" ? KINDS.get(method) : undefined;
  if (kind === undefined) return `not a server event method: ${String(method).slice(0, 80)}`;
  if (
    params !== undefined &&
    (typeof params !== "object" || params === null || Array.isArray(params))
  ) {
    return "params is not an object";
  }
  const { _meta: _ignored, ...rest } = (params ?? {}) as Record<string, unknown>;
  if (kind === "resource_updated") {
    const { uri, ...others } = rest;
    if (typeof uri !== "string") return "notifications/resources/updated without a uri";
    return withParams({ kind, uri }, others);
  }
  return withParams({ kind }, rest);
}

function withParams(event: ServerEvent, params: Record<string, unknown>): ServerEvent {
  return Object.keys(params).length === 0 ? event : { ...event, params };
}
