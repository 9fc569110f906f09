/**
 * The storage convention both MCP stores share, against the one table both suites read
 * (`tests/fixtures/stream-convention.json` at the repository's root; the Python suite reads
 * the same file in `clients/python/tests/mcp/test_convention.py`): names, the split of a
 * message into events, the join of stored events back into messages, and the placeholder of
 * an unstored message.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { MessageAssembler, splitMessage, Unjoinable } from "../src/encoding.js";
import { MAX_STREAM_ID, StreamNames } from "../src/names.js";
import { EventLogEventStore, UNSTORED_PREFIX } from "../src/index.js";
import { REPO } from "./support/service.js";

interface NameCase {
  readonly scope: string;
  readonly sdk_stream: string;
  readonly name: string;
}
interface Event {
  readonly event: string | null;
  readonly data: string;
}
interface SplitCase {
  readonly description: string;
  readonly data: string | null;
  readonly max_event_bytes: number;
  readonly events: Event[];
}
interface JoinCase {
  readonly description: string;
  readonly events: Event[];
  readonly messages?: string[];
  readonly error?: string;
}
interface Large {
  readonly unit: string;
  readonly bytes: number;
  readonly max_event_bytes: number;
  readonly events: { event: string; bytes: number; sha256: string }[];
  readonly message_sha256: string;
}

const TABLE = JSON.parse(
  readFileSync(join(REPO, "tests", "fixtures", "stream-convention.json"), "utf8"),
) as {
  names: { cases: NameCase[] };
  split: { cases: SplitCase[]; large: Large };
  join: { cases: JoinCase[] };
  placeholder: { prefix: string; pattern: string };
};
const CONTRACT_STREAM_ID = /^[A-Za-z0-9._~:@=+-]{1,256}$/;
const encoder = new TextEncoder();
const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");

describe("stream names", () => {
  it("the table has its cases (plain, escaped, at the length bound, hashed)", () => {
    const names = TABLE.names.cases;
    assert.ok(names.length >= 30);
    assert.ok(names.filter((c) => c.name.includes(".~h")).length >= 2);
    assert.ok(names.some((c) => c.name.length === MAX_STREAM_ID));
  });

  for (const c of TABLE.names.cases) {
    it(`names ${JSON.stringify(c.sdk_stream.slice(0, 40))} in scope ${c.scope} as the table says`, async () => {
      const names = new StreamNames();
      const name = await names.name(c.scope, c.sdk_stream);
      assert.equal(name, c.name);
      assert.match(name, CONTRACT_STREAM_ID);
      assert.deepEqual(names.parse(name), { scope: c.scope, sdkStream: c.sdk_stream });
    });
  }

  it("one SDK stream in two sessions has two names", async () => {
    const names = new StreamNames();
    assert.notEqual(await names.name("A", "1"), await names.name("B", "1"));
  });

  for (const foreign of ["sess-1.req-7", "mcp.", "mcp.scope", "mcp..1", "other.a.b", "mcp.s.~ff"]) {
    it(`does not read ${JSON.stringify(foreign)} as one of its names`, () => {
      assert.equal(new StreamNames().parse(foreign), undefined);
    });
  }

  it("a hashed name reads back only where it was made, and is forgotten past the bound", async () => {
    const names = new StreamNames(1);
    const first = await names.name("A", "y".repeat(300));
    assert.deepEqual(names.parse(first), { scope: "A", sdkStream: "y".repeat(300) });
    assert.equal(new StreamNames().parse(first), undefined);
    await names.name("A", "z".repeat(300));
    assert.equal(names.parse(first), undefined);
  });
});

describe("the split of a message", () => {
  for (const c of TABLE.split.cases) {
    it(c.description, () => {
      const events = splitMessage(c.data, c.max_event_bytes);
      assert.deepEqual(
        events.map((e) => ({ event: e.event, data: e.data })),
        c.events,
      );
      for (const e of events) assert.ok(encoder.encode(e.data).length <= c.max_event_bytes);
    });
  }

  it("a large tool result is split as the table says", () => {
    const large = TABLE.split.large;
    const unitBytes = encoder.encode(large.unit).length;
    const raw = encoder.encode(large.unit.repeat(Math.floor(large.bytes / unitBytes) + 1));
    // Cut at `bytes`, then back to whole characters (what Python's errors="ignore" does).
    let end = large.bytes;
    while (end > 0 && ((raw[end] ?? 0) & 0xc0) === 0x80) end -= 1;
    const text = new TextDecoder().decode(raw.subarray(0, end));
    const result = { content: [{ type: "text", text }], isError: false };
    const message = JSON.stringify({ jsonrpc: "2.0", id: 9, result });
    assert.equal(sha256(message), large.message_sha256);
    const events = splitMessage(message, large.max_event_bytes);
    assert.deepEqual(
      events.map((e) => ({
        event: e.event,
        bytes: encoder.encode(e.data).length,
        sha256: sha256(e.data),
      })),
      large.events,
    );
  });
});

describe("the join of stored events", () => {
  for (const c of TABLE.join.cases) {
    it(c.description, () => {
      const assembler = new MessageAssembler();
      const messages: unknown[] = [];
      let error: string | undefined;
      try {
        c.events.forEach((e, index) => {
          const done = assembler.push({ id: `t:${index + 1}`, seq: index + 1, ...e });
          if (done !== undefined) messages.push(done.message);
        });
      } catch (thrown) {
        assert.ok(thrown instanceof Unjoinable);
        error = thrown.reason;
      }
      assert.deepEqual(
        messages,
        (c.messages ?? []).map((m) => JSON.parse(m) as unknown),
      );
      assert.equal(error, c.error);
    });
  }
});

describe("placeholders", () => {
  it("an unstored message's id has the table's form", async () => {
    assert.equal(UNSTORED_PREFIX, TABLE.placeholder.prefix);
    const store = new EventLogEventStore({
      baseUrl: "http://127.0.0.1:1",
      maxMessageBytes: 1,
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
    });
    const id = await store.storeEvent("1", { jsonrpc: "2.0", method: "notifications/x" });
    assert.match(id, new RegExp(TABLE.placeholder.pattern));
  });
});
