/** Service stream names of SDK streams: the table shared with the Python store, and read-back. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { MAX_STREAM_ID, StreamNames } from "../src/index.js";
import { packageRoot } from "./support/service.js";

interface Case {
  readonly scope: string;
  readonly sdk_stream: string;
  readonly name: string;
}

const TABLE = JSON.parse(
  readFileSync(join(packageRoot(), "test", "fixtures", "stream-names.json"), "utf8"),
) as { cases: Case[] };
const CONTRACT_STREAM_ID = /^[A-Za-z0-9._~:@=+-]{1,256}$/;

describe("stream names", () => {
  it("the shared table has its cases (plain, escaped, at the length bound, hashed)", () => {
    assert.ok(TABLE.cases.length >= 20);
    assert.ok(TABLE.cases.some((c) => c.name.includes(".~h")));
    assert.ok(TABLE.cases.some((c) => c.name.length === MAX_STREAM_ID));
  });

  for (const c of TABLE.cases) {
    it(`names ${JSON.stringify(c.sdk_stream.slice(0, 40))} in scope ${c.scope} as the Python store does`, async () => {
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
