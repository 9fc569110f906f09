/**
 * The problem-code table of `errors.ts` against the one table of the service's codes,
 * `tests/fixtures/problem-codes.json` at the repository's root (the Python client's suite
 * checks its `errors.py` against the same file): every code there has its class here, with
 * the statuses it documents (one row per code and status), and this client knows no code the
 * service does not answer with.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { errorFor, EventLogError, refusalClasses, ServiceRefusal } from "../src/index.js";
import { REPO } from "./support/service.js";

const TABLE = JSON.parse(
  readFileSync(join(REPO, "tests", "fixtures", "problem-codes.json"), "utf8"),
) as { codes: { code: string; status: number; meaning: string }[] };

describe("the problem-code table", () => {
  it("is the service's: the same codes, each with its statuses", () => {
    const ours = [...refusalClasses()].flatMap(([code, cls]) =>
      cls.statuses.map((status) => `${code} ${status}`),
    );
    const theirs = TABLE.codes.map(({ code, status }) => `${code} ${status}`);
    assert.deepEqual(ours.sort(), theirs.sort());
  });

  it("each code makes its own class, a ServiceRefusal; an unknown code a bare one", () => {
    for (const { code, status } of TABLE.codes) {
      const error = errorFor(status, code, "detail");
      assert.ok(error instanceof ServiceRefusal && error instanceof EventLogError, code);
      assert.notEqual(error.constructor, ServiceRefusal, `${code} has no class of its own`);
      assert.equal((error.constructor as typeof ServiceRefusal).code, code);
      assert.deepEqual([error.status, error.code, error.detail], [status, code, "detail"]);
      assert.equal(error.name, error.constructor.name);
    }
    assert.equal(errorFor(409, "brand_new_code", "").constructor, ServiceRefusal);
  });
});
