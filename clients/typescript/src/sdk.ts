/**
 * What this package needs of the MCP TypeScript SDKs, by shape: the `EventStore` seam of
 * both generations (`@modelcontextprotocol/sdk` 1.x and `@modelcontextprotocol/server` 2.x
 * declare the same interface, 2.x with `getStreamIdForEventId` optional) and the
 * `ServerEventBus` seam of 2.x.
 *
 * Declared here rather than imported so that the package's types need neither SDK: a
 * program on either generation installs only its own, and the store and the bus are
 * assignable to each generation's interface (the test suite checks both).
 */

/** The SDK's name of an SSE stream of a session (a POST's UUID, or `_GET_stream`). */
export type StreamId = string;

/** An SSE event id, as handed to the client and sent back in `Last-Event-ID`. */
export type EventId = string;

/** A JSON-RPC request id. */
export type RequestId = string | number;

/** A JSON-RPC message as the SDK hands it to the store (`{}` for a priming event). */
export type McpMessage = object;

/**
 * The callback the SDK gives `replayEventsAfter` to write an event on the resumed stream.
 * Declared as a method's type so that a callback typed with either SDK's own `JSONRPCMessage`
 * is accepted (method parameters are compared both ways; a plain function type would demand
 * that the SDK's callback take any object).
 */
export type SendEvent = {
  send(eventId: EventId, message: McpMessage): Promise<void>;
}["send"];

/** The `EventStore` of both SDK generations. */
export interface McpEventStore {
  storeEvent(streamId: StreamId, message: McpMessage): Promise<EventId>;
  getStreamIdForEventId?(eventId: EventId): Promise<StreamId | undefined>;
  replayEventsAfter(lastEventId: EventId, options: { send: SendEvent }): Promise<StreamId>;
}

/**
 * A change event of a 2026-07-28 server, for `subscriptions/listen` streams: the SDK's
 * `ServerEvent` (`@modelcontextprotocol/server` 2.4). Each kind becomes one notification:
 * `tools_list_changed` → `notifications/tools/list_changed`, `prompts_list_changed` →
 * `notifications/prompts/list_changed`, `resources_list_changed` →
 * `notifications/resources/list_changed`, `resource_updated` →
 * `notifications/resources/updated` (with its `uri`).
 */
export type ServerEvent = (
  | { kind: "tools_list_changed" }
  | { kind: "prompts_list_changed" }
  | { kind: "resources_list_changed" }
  | { kind: "resource_updated"; uri: string }
) & {
  /** Forwarded notification params (the SDK stamps its own subscription id and the URI). */
  params?: { [key: string]: unknown } | undefined;
};

/** The SDK's `ServerEventBus` (2.x): where a 2026-07-28 server's change events travel. */
export interface McpServerEventBus {
  publish(event: ServerEvent): void;
  subscribe(listener: (event: ServerEvent) => void): () => void;
}
