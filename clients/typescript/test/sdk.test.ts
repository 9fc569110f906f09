/**
 * The store is the `EventStore` of both SDK generations, by type (this file compiles only if
 * so) and by what the SDK asks of it; the package's own types name neither SDK.
 */

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import type { EventStore as EventStoreV1 } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  type EventStore as EventStoreV2,
  InMemoryServerEventBus,
  type ServerEventBus,
} from "@modelcontextprotocol/server";

import {
  EventLogEventStore,
  EventLogServerEventBus,
  type McpServerEventBus,
} from "../src/index.js";
import { packageRoot } from "./support/service.js";

describe("both SDK generations", () => {
  it("the store is each generation's EventStore, getStreamIdForEventId included", () => {
    const store = new EventLogEventStore({ baseUrl: "http://127.0.0.1:9" });
    const v1: EventStoreV1 = store;
    const v2: EventStoreV2 = store;
    assert.equal(typeof v1.getStreamIdForEventId, "function");
    assert.equal(typeof v2.getStreamIdForEventId, "function");
  });

  it("the bus is the 2.x ServerEventBus, and takes the SDK's events", () => {
    const bus: ServerEventBus = new EventLogServerEventBus({ baseUrl: "http://127.0.0.1:9" });
    const sdks: McpServerEventBus = new InMemoryServerEventBus();
    assert.equal(typeof bus.publish, "function");
    assert.equal(typeof sdks.subscribe, "function");
  });

  it("the built types import neither SDK (a program installs only its own)", () => {
    const dist = join(packageRoot(), "dist");
    const declarations = readdirSync(dist).filter((name) => name.endsWith(".d.ts"));
    assert.ok(declarations.length > 5, "build the package first (npm test builds it)");
    for (const name of declarations) {
      const source = readFileSync(join(dist, name), "utf8");
      assert.doesNotMatch(source, /(from |import\()"@modelcontextprotocol\//, name);
    }
  });
});
