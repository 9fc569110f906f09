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
  InvalidResponse,
  MalformedResponse,
  NotFoundError,
  refusalClasses,
  ResumeRefused,
  RetryLaterError,
  ServiceFaultError,
  ServiceRefusal,
  ServiceUnreachable,
  TaskFailed,
  TasksProtocolError,
  TaskStopped,
  TooLargeError,
  Unjoinable,
} from "../src/index.js";
import * as entry from "../src/index.js";
import { NotUtf8 } from "../src/body.js";
import { GROUPS } from "../src/errors.js";
import { errorOf } from "../src/task-runner.js";
import { MalformedStream } from "../src/sse.js";
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

describe("the package's own errors", () => {
  it("are EventLogErrors with their code, status 0, their name and message", () => {
    const refusal = { verdict: "reset", reason: "not_stored", detail: "lost" } as const;
    const cases: [EventLogError, string, string, string][] = [
      [
        new Unjoinable("mid_message", "part 2/3 first"),
        "mid_message",
        "Unjoinable",
        "part 2/3 first",
      ],
      [new Unjoinable("not_a_message", "not JSON"), "not_a_message", "Unjoinable", "not JSON"],
      [
        new ResumeRefused("tok:3", refusal),
        "resume_refused",
        "ResumeRefused",
        "cannot resume tok:3 (reset: not_stored): lost",
      ],
      [new TaskFailed(-32602, "bad arguments"), "task_failed", "TaskFailed", "bad arguments"],
      [
        new TaskStopped("superseded"),
        "task_stopped",
        "TaskStopped",
        "the task is no longer this worker's: superseded",
      ],
    ];
    for (const [error, code, name, message] of cases) {
      assert.ok(error instanceof EventLogError, name);
      assert.deepEqual(
        [error.status, error.code, error.name, error.message],
        [0, code, name, message],
      );
    }
    assert.equal(new ResumeRefused("tok:3", refusal).detail, "lost");
    assert.equal(new ResumeRefused("tok:3", refusal).refusal, refusal);
    assert.equal(new TaskStopped("terminal").reason, "terminal");
    assert.equal(new Unjoinable("mid_message", "x").reason, "mid_message");
  });

  it("keep a TaskFailed's JSON-RPC error as rpcCode, message and data", () => {
    const failed = new TaskFailed(-32602, "bad arguments", { field: "x" });
    assert.deepEqual([failed.rpcCode, failed.detail], [-32602, "-32602: bad arguments"]);
    const error = { code: -32602, message: "bad arguments", data: { field: "x" } };
    assert.deepEqual(failed.toError(), error);
    assert.deepEqual(errorOf(failed), error);
    assert.deepEqual(errorOf(new TaskFailed(-32000, "declined")), {
      code: -32000,
      message: "declined",
    });
  });

  it("a broken stream or body is an answer this client will not act on", () => {
    const broken = new MalformedStream("a live frame is not UTF-8");
    const long = new MalformedStream("a live stream line is over 64 bytes", true);
    const notUtf8 = new NotUtf8();
    for (const error of [broken, long, notUtf8]) assert.ok(error instanceof InvalidResponse);
    assert.ok(notUtf8 instanceof MalformedResponse);
    assert.deepEqual(
      [broken.code, broken.name, broken.message, broken.tooLarge],
      ["malformed_response", "MalformedStream", "a live frame is not UTF-8", false],
    );
    assert.deepEqual([long.code, long.tooLarge], ["response_too_large", true]);
    assert.deepEqual(
      [notUtf8.code, notUtf8.name, notUtf8.message],
      ["malformed_response", "NotUtf8", "the answer is not UTF-8"],
    );
  });

  it("only EventLogError and TasksProtocolError sit directly under Error", () => {
    // TasksProtocolError is what a handler throws to the SDK: its code is a JSON-RPC number.
    const classes = Object.values(entry as Record<string, unknown>).filter(
      (value): value is abstract new (...args: never[]) => Error =>
        typeof value === "function" && value.prototype instanceof Error,
    );
    const underError = classes.filter((cls) => Object.getPrototypeOf(cls) === Error);
    assert.deepEqual(underError.map((cls) => cls.name).sort(), [
      "EventLogError",
      "TasksProtocolError",
    ]);
    assert.equal(new TasksProtocolError(-32021, "missing").code, -32021);
  });
});
