/**
 * The problem-code table of `errors.ts` against the one table of the service's codes,
 * `tests/fixtures/problem-codes.json` at the repository's root (the Python client's suite
 * checks its `errors.py` against the same file): every code there has its class here, with
 * the statuses it documents (one row per code and status), under the one group the fixture
 * gives it, and this client knows no code the service does not answer with.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import {
  AccessDeniedError,
  ChannelUnavailable,
  ConflictError,
  DeadlineExceeded,
  errorFor,
  EventLogError,
  FencedError,
  GoneError,
  InvalidRequestError,
  NotFoundError,
  refusalClasses,
  RetryLaterError,
  ServiceFaultError,
  ServiceRefusal,
  ServiceUnreachable,
  TooLargeError,
} from "../src/index.js";
import * as entry from "../src/index.js";
import { GROUPS } from "../src/errors.js";
import { REPO } from "./support/service.js";

const TABLE = JSON.parse(
  readFileSync(join(REPO, "tests", "fixtures", "problem-codes.json"), "utf8"),
) as {
  groups: Record<string, string>;
  codes: { code: string; status: number; group: string; meaning: string }[];
};

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

  it("puts every code in exactly one group, the fixture's, each group right under ServiceRefusal", () => {
    assert.deepEqual([...GROUPS.keys()].sort(), Object.keys(TABLE.groups).sort());
    for (const { code, group } of TABLE.codes) {
      const error = errorFor(0, code, "");
      const groups = [...GROUPS].filter(([, cls]) => error instanceof cls).map(([name]) => name);
      assert.deepEqual(groups, [group], code);
    }
    for (const cls of GROUPS.values()) {
      assert.equal(Object.getPrototypeOf(cls), ServiceRefusal);
    }
  });

  it("lets a caller catch a refusal by its group", () => {
    const cases: [number, string, typeof ServiceRefusal][] = [
      [409, "superseded", FencedError],
      [409, "abandoned", FencedError],
      [409, "seq_gap", ConflictError],
      [404, "unknown_stream", NotFoundError],
      [410, "evicted", GoneError],
      [409, "expired", GoneError],
      [413, "event_too_large", TooLargeError],
      [503, "database_unavailable", RetryLaterError],
      [422, "validation_error", InvalidRequestError],
      [401, "unauthorized", AccessDeniedError],
      [500, "storage_error", ServiceFaultError],
    ];
    for (const [status, code, group] of cases) {
      try {
        throw errorFor(status, code, "detail");
      } catch (error) {
        assert.ok(error instanceof group, code);
        assert.ok(error instanceof EventLogError);
        assert.deepEqual([error.status, error.code, error.detail], [status, code, "detail"]);
        const others = [...GROUPS.values()].filter((cls) => cls !== group);
        assert.ok(!others.some((cls) => error instanceof cls), code);
      }
    }
  });

  it("exports every group and code class from the package's entry", () => {
    const exported = entry as Record<string, unknown>;
    for (const cls of [...GROUPS.values(), ...refusalClasses().values()]) {
      assert.equal(exported[cls.name], cls, cls.name);
    }
    assert.ok(new ChannelUnavailable(0, "channel_unavailable", "") instanceof ServiceUnreachable);
    assert.ok(new DeadlineExceeded(0, "timeout", "") instanceof EventLogError);
  });
});
