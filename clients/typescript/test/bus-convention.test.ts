/**
 * The bus convention both buses share (the Python `EventLogSubscriptionBus` and this
 * package's `EventLogServerEventBus`), against the one table both suites read:
 * `tests/fixtures/bus-convention.json` at the repository's root.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import {
  BUS_EVENT_TYPE,
  BUS_STREAM_PREFIX,
  busStreamId,
  decodeServerEvent,
  encodeServerEvent,
  type ServerEvent,
} from "../src/index.js";
import { REPO } from "./support/service.js";

const TABLE = JSON.parse(
  readFileSync(join(REPO, "tests", "fixtures", "bus-convention.json"), "utf8"),
) as {
  stream_prefix: string;
  event_type: string;
  examples: { event: ServerEvent; data: string }[];
};

describe("the bus convention", () => {
  it("the stream prefix and the event type are the table's", () => {
    assert.equal(BUS_STREAM_PREFIX, TABLE.stream_prefix);
    assert.equal(BUS_EVENT_TYPE, TABLE.event_type);
    assert.equal(busStreamId(), `${TABLE.stream_prefix}default`);
    assert.equal(busStreamId("fleet-1"), `${TABLE.stream_prefix}fleet-1`);
    assert.throws(() => busStreamId("no spaces"), RangeError);
    assert.throws(() => busStreamId(".."), RangeError);
    assert.throws(() => busStreamId("x".repeat(241)), RangeError);
  });

  it("every example is stored as exactly its data, and read back as its event", () => {
    const kinds = new Set(TABLE.examples.map((example) => example.event.kind));
    assert.equal(kinds.size, 4, "the four kinds of server event");
    for (const { event, data } of TABLE.examples) {
      assert.equal(encodeServerEvent(event), data);
      assert.deepEqual(decodeServerEvent(data), event);
    }
  });

  it("params travel without _meta; a stored event that is no server event is named, not thrown", () => {
    const event: ServerEvent = {
      kind: "resource_updated",
      uri: "file:///a.md",
      params: { _meta: { "io.modelcontextprotocol/subscriptionId": 3 }, title: "A" },
    };
    const data = encodeServerEvent(event);
    assert.equal(
      data,
      '{"method":"notifications/resources/updated","params":{"uri":"file:///a.md","title":"A"}}',
    );
    assert.deepEqual(decodeServerEvent(data), {
      kind: "resource_updated",
      uri: "file:///a.md",
      params: { title: "A" },
    });
    assert.deepEqual(decodeServerEvent('{"method":"notifications/tools/list_changed"}'), {
      kind: "tools_list_changed",
    });
    for (const bad of [
      "not json",
      "[1]",
      '{"method":"notifications/message","params":{}}',
      '{"method":"notifications/resources/updated","params":{}}',
      '{"method":"notifications/tools/list_changed","params":[]}',
    ]) {
      assert.equal(typeof decodeServerEvent(bad), "string", bad);
    }
  });
});
