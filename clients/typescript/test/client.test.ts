/** `EventLogClient` against a real service process: calls, error classes, retries, paging. */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  BatchTooLarge,
  DatabaseUnavailable,
  errorFor,
  EventLogClient,
  EventLogError,
  EventTooLarge,
  Evicted,
  Forbidden,
  SeqConflict,
  SeqGap,
  ServiceClient,
  ServiceRefusal,
  ServiceUnreachable,
  Superseded,
  TaskClient,
  TerminalGeneration,
  Unauthorized,
  UnknownGeneration,
  UnknownStream,
  ValidationFailed,
} from "../src/index.js";
import { FaultyProxy } from "./support/proxy.js";
import { freePort, type Service, startService } from "./support/service.js";
import { failure } from "./support/failure.js";

const FAST_RETRY = { attempts: 4, baseDelayMs: 5, maxDelayMs: 50 };
const WRITER_KEY = "wr-ts-tests-0123456789";
const ADMIN_KEY = "ad-ts-tests-0123456789";

let service: Service;
let guarded: Service;

before(async () => {
  [service, guarded] = await Promise.all([
    startService("sqlite", {
      env: { EVENTLOG_MAX_EVENT_BYTES: "4096", EVENTLOG_MAX_BATCH_EVENTS: "40" },
    }),
    startService("sqlite", {
      env: {
        EVENTLOG_KEYS: JSON.stringify([
          { scope: "writer", tenant: "acme", key: WRITER_KEY },
          { scope: "admin", key: ADMIN_KEY },
        ]),
      },
    }),
  ]);
});

after(async () => {
  await Promise.all([service?.stop(), guarded?.stop()]);
});

function client(baseUrl = service.url): EventLogClient {
  return new EventLogClient({ baseUrl, retry: FAST_RETRY, timeoutMs: 10_000 });
}

function unique(name: string): string {
  return `${name}.${Math.random().toString(36).slice(2, 10)}`;
}

/** Run `test` with a client whose calls pass a fresh `FaultyProxy` in front of the service. */
async function throughProxy(
  test: (proxy: FaultyProxy, log: EventLogClient) => Promise<void>,
): Promise<void> {
  const proxy = await FaultyProxy.start(service.url);
  try {
    await test(proxy, client(proxy.url));
  } finally {
    await proxy.down();
  }
}

describe("the writer calls", () => {
  it("open, append, resume, page and the stream view speak the contract", async () => {
    const log = client();
    const streamId = unique("sess-1.req-7");
    const generation = await log.openGeneration(streamId, { producer: "ts-test", maxEvents: 100 });
    assert.equal(generation.streamId, streamId);
    assert.equal(generation.epoch, 1);
    assert.equal(generation.headSeq, 1);
    assert.equal(generation.tailSeq, 0);
    assert.equal(generation.producer, "ts-test");
    assert.equal(generation.supersedes, null);

    const appended = await log.append(
      generation.token,
      [{ data: "a" }, { data: "b", event: "progress" }],
      {
        firstSeq: 1,
      },
    );
    assert.deepEqual(appended.eventIds, [`${generation.token}:1`, `${generation.token}:2`]);
    assert.equal(appended.tailSeq, 2);
    assert.equal(appended.duplicate, false);

    const answer = await log.resume(`${generation.token}:1`, { streamId });
    assert.equal(answer.verdict, "resume");
    assert.equal(answer.reason, "ok");
    assert.equal(answer.generation, generation.token);
    assert.deepEqual(
      answer.events.map((e) => [e.id, e.seq, e.event, e.data]),
      [[`${generation.token}:2`, 2, "progress", "b"]],
    );

    const byIdAlone = await log.resume(`${generation.token}:0`);
    assert.equal(byIdAlone.streamId, streamId);
    assert.equal(byIdAlone.events.length, 2);

    const page = await log.page(generation.token, { after: 0, limit: 1 });
    assert.deepEqual(
      page.events.map((e) => e.data),
      ["a"],
    );
    assert.equal(page.nextAfter, 1);

    const view = await log.stream(streamId);
    assert.equal(view.streamId, streamId);
    assert.equal(view.generations, 1);
    assert.equal(view.current?.token, generation.token);
    assert.equal(view.current?.tailSeq, 2);
  });

  it("a page long-polls past the attempt's deadline: the next append answers it, or `wait` runs out", async () => {
    const log = new EventLogClient({ baseUrl: service.url, retry: FAST_RETRY, timeoutMs: 1_000 });
    const generation = await log.openGeneration(unique("long-poll"));
    const waiting = log.page(generation.token, { wait: 5 });
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    await log.append(generation.token, [{ data: "a" }], { firstSeq: 1 });
    assert.deepEqual(
      (await waiting).events.map((e) => e.data),
      ["a"],
    );
    const empty = await log.page(generation.token, { after: 1, wait: 1.5 });
    assert.deepEqual(empty.events, []);
  });

  it("a superseded generation resets, with the new one to start over from", async () => {
    const log = client();
    const streamId = unique("s");
    const first = await log.openGeneration(streamId);
    await log.append(first.token, [{ data: "x" }], { firstSeq: 1 });
    const second = await log.openGeneration(streamId, { reason: "failover" });
    assert.equal(second.supersedes, first.token);
    const answer = await log.resume(`${first.token}:1`, { streamId });
    assert.equal(answer.verdict, "reset");
    assert.equal(answer.reason, "superseded");
    assert.equal(answer.discardClientState, true);
    assert.equal(answer.generation, second.token);
  });

  it("eventsAfter pages to the end, and an evicted range is an error, never skipped", async () => {
    const log = client();
    const generation = await log.openGeneration(unique("paged"), { maxEvents: 30 });
    const events = Array.from({ length: 25 }, (_, i) => ({ data: `e${i + 1}` }));
    await log.append(generation.token, events, { firstSeq: 1 });
    const read: string[] = [];
    for await (const event of log.eventsAfter(generation.token, 3, { limit: 10 }))
      read.push(event.data);
    assert.deepEqual(
      read,
      events.slice(3).map((e) => e.data),
    );

    const small = await log.openGeneration(unique("evicting"), { maxEvents: 2 });
    await log.append(small.token, events.slice(0, 5), { firstSeq: 1 });
    const evicted = await failure(
      (async () => {
        for await (const _ of log.eventsAfter(small.token, 0)) {
          // reading is the point
        }
      })(),
    );
    assert.ok(evicted instanceof Evicted);
    assert.equal(evicted.status, 410);
  });
});

describe("one error class per problem code", () => {
  it("every refusal of an append has its class", async () => {
    const log = client();
    const streamId = unique("refusals");
    const old = await log.openGeneration(streamId);
    await log.append(old.token, [{ data: "1" }], { firstSeq: 1 });
    const current = await log.openGeneration(streamId);
    await log.append(current.token, [{ data: "1" }], { firstSeq: 1 });

    const cases: [
      () => Promise<unknown>,
      new (...args: never[]) => EventLogError,
      number,
      string,
    ][] = [
      [() => log.append(old.token, [{ data: "2" }]), Superseded, 409, "superseded"],
      [
        () => log.append(current.token, [{ data: "other" }], { firstSeq: 1 }),
        SeqConflict,
        409,
        "seq_conflict",
      ],
      [() => log.append(current.token, [{ data: "3" }], { firstSeq: 3 }), SeqGap, 409, "seq_gap"],
      [
        () => log.append("AAAAAAAAAAAAAAAAAAAAAA", [{ data: "x" }]),
        UnknownGeneration,
        404,
        "unknown_generation",
      ],
      [
        () => log.append(current.token, [{ data: "x".repeat(5000) }]),
        EventTooLarge,
        413,
        "event_too_large",
      ],
      [
        () =>
          log.append(
            current.token,
            Array.from({ length: 41 }, () => ({ data: "x" })),
          ),
        BatchTooLarge,
        413,
        "batch_too_large",
      ],
      [() => log.openGeneration("no spaces allowed"), ValidationFailed, 422, "validation_error"],
      [() => log.stream(unique("nothing-here")), UnknownStream, 404, "unknown_stream"],
    ];
    for (const [call, cls, status, code] of cases) {
      const error = await failure(call());
      assert.ok(error instanceof cls, `${code}: got ${error.name} ${error.message}`);
      assert.equal(error.status, status);
      assert.equal(error.code, code);
      assert.ok(error.detail.length > 0);
    }

    await log.append(current.token, [], { terminal: true });
    const terminal = await failure(log.append(current.token, [{ data: "after" }]));
    assert.ok(terminal instanceof TerminalGeneration);
  });

  it("a key is sent as a bearer token; without one or with the wrong scope it is refused", async () => {
    const writer = new EventLogClient({ baseUrl: guarded.url, key: WRITER_KEY });
    const generation = await writer.openGeneration(unique("keyed"));
    assert.equal(generation.epoch, 1);

    const anonymous = await failure(
      new EventLogClient({ baseUrl: guarded.url, key: "" }).stream("x"),
    );
    assert.ok(anonymous instanceof Unauthorized);
    assert.equal(anonymous.status, 401);
    const admin = await failure(
      new EventLogClient({ baseUrl: guarded.url, key: ADMIN_KEY }).stream("x"),
    );
    assert.ok(admin instanceof Forbidden);
    assert.equal(admin.status, 403);
  });

  it("the URL and the key come from EVENTLOG_URL and EVENTLOG_KEY when not given", async () => {
    const saved = { url: process.env["EVENTLOG_URL"], key: process.env["EVENTLOG_KEY"] };
    process.env["EVENTLOG_URL"] = `${guarded.url}/`;
    process.env["EVENTLOG_KEY"] = WRITER_KEY;
    try {
      const log = new EventLogClient();
      assert.equal(log.connection.baseUrl, guarded.url);
      const generation = await log.openGeneration(unique("from-env"));
      assert.equal(generation.epoch, 1);
    } finally {
      for (const [name, value] of [
        ["EVENTLOG_URL", saved.url],
        ["EVENTLOG_KEY", saved.key],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it("both clients are ServiceClients: a connection of their own from the options, or a shared one", () => {
    const log = new EventLogClient({ baseUrl: "http://one.test/", key: "k", timeoutMs: 2500 });
    const tasks = new TaskClient({ baseUrl: "http://one.test/", key: "k", timeoutMs: 2500 });
    for (const client of [log, tasks]) {
      assert.ok(client instanceof ServiceClient);
      assert.equal(client.connection.baseUrl, "http://one.test");
    }
    assert.notEqual(tasks.connection, log.connection);
    assert.equal(new TaskClient({ connection: log.connection }).connection, log.connection);
  });

  it("an unknown code maps to a bare ServiceRefusal, and a non-problem answer keeps its status", async () => {
    const error = errorFor(409, "brand_new_code", "from a newer service");
    assert.equal(error.constructor, ServiceRefusal);
    assert.equal(error.code, "brand_new_code");

    const proxy = await FaultyProxy.start(service.url);
    try {
      const log = client(proxy.url);
      proxy.inject({
        kind: "answer",
        status: 409,
        body: '{"code": "brand_new_code", "detail": "new"}',
      });
      const unknown = await failure(log.stream("x"));
      assert.equal(unknown.constructor, ServiceRefusal);
      assert.deepEqual(
        [unknown.status, unknown.code, unknown.detail],
        [409, "brand_new_code", "new"],
      );

      proxy.inject({
        kind: "answer",
        status: 418,
        body: "I am a teapot",
        headers: { "content-type": "text/plain" },
      });
      const bare = await failure(log.stream("x"));
      assert.deepEqual([bare.status, bare.code, bare.detail], [418, "http_error", "I am a teapot"]);
    } finally {
      await proxy.down();
    }
  });
});

describe("retries: only what is safe", () => {
  const unavailable = {
    kind: "answer" as const,
    status: 503,
    body: '{"code": "database_unavailable", "detail": "locked"}',
    headers: { "retry-after": "0" },
  };
  const isAppend = (method: string, path: string): boolean =>
    method === "POST" && path.endsWith("/events");
  const isOpen = (method: string, path: string): boolean =>
    method === "POST" && path.endsWith("/generations");

  it("an append with firstSeq is retried through 503s and lost answers, and stored once", () =>
    throughProxy(async (proxy, log) => {
      const generation = await log.openGeneration(unique("retried"));
      proxy.inject(unavailable, isAppend);
      proxy.inject({ kind: "drop" }, isAppend);
      proxy.inject({ kind: "lose-answer" }, isAppend);
      const result = await log.append(generation.token, [{ data: "once" }], { firstSeq: 1 });
      assert.equal(proxy.count(isAppend), 4);
      assert.equal(result.duplicate, true, "the fourth try found the third one's append stored");
      assert.deepEqual(result.eventIds, [`${generation.token}:1`]);
      const page = await log.page(generation.token);
      assert.deepEqual(
        page.events.map((e) => e.data),
        ["once"],
      );
      assert.equal(page.tailSeq, 1);
    }));

  it("an append without firstSeq and opening a generation are never retried", () =>
    throughProxy(async (proxy, log) => {
      const generation = await log.openGeneration(unique("not-retried"));
      proxy.inject(unavailable, isAppend);
      const append = await failure(log.append(generation.token, [{ data: "x" }]));
      assert.ok(append instanceof DatabaseUnavailable);
      assert.equal(proxy.count(isAppend), 1);

      proxy.inject({ kind: "drop" }, isOpen);
      const open = await failure(log.openGeneration(unique("not-retried")));
      assert.ok(open instanceof ServiceUnreachable);
      assert.equal(proxy.count(isOpen), 2, "the first open, and this one once");
    }));

  it("reads and resumes are retried; a refusal (4xx) is not; past the attempts the 5xx is raised", () =>
    throughProxy(async (proxy, log) => {
      const generation = await log.openGeneration(unique("reads"));
      proxy.inject({ kind: "drop" });
      proxy.inject(unavailable);
      const answer = await log.resume(`${generation.token}:0`);
      assert.equal(answer.verdict, "resume");
      assert.equal(proxy.requests.length, 4);

      const before = proxy.requests.length;
      await failure(log.stream(unique("missing")));
      assert.equal(proxy.requests.length - before, 1);

      for (let i = 0; i < FAST_RETRY.attempts; i += 1) proxy.inject(unavailable);
      const exhausted = await failure(log.page(generation.token));
      assert.ok(exhausted instanceof DatabaseUnavailable);
      assert.equal(proxy.requests.length - before, 1 + FAST_RETRY.attempts);
    }));

  it("an unreachable service is ServiceUnreachable (status 0, with the cause), after the attempts", async () => {
    const log = new EventLogClient({
      baseUrl: `http://127.0.0.1:${await freePort()}`,
      retry: FAST_RETRY,
    });
    const error = await failure(log.resume("a:1"));
    assert.ok(error instanceof ServiceUnreachable);
    assert.equal(error.status, 0);
    assert.equal(error.code, "unreachable");
    assert.ok(error.cause instanceof Error);
  });

  it("a stalled answer times out per attempt; an abort stops at once with its reason", async () => {
    const proxy = await FaultyProxy.start(service.url);
    try {
      const log = new EventLogClient({
        baseUrl: proxy.url,
        timeoutMs: 200,
        retry: { ...FAST_RETRY, attempts: 2 },
      });
      proxy.inject({ kind: "stall" });
      proxy.inject({ kind: "stall" });
      const timedOut = await failure(log.resume("a:1"));
      assert.ok(timedOut instanceof ServiceUnreachable);
      assert.equal(proxy.requests.length, 2);

      proxy.inject({ kind: "stall" });
      const controller = new AbortController();
      const call = log.resume("a:1", { signal: controller.signal });
      controller.abort(new Error("the caller gave up"));
      await assert.rejects(call, /the caller gave up/);
      assert.ok(proxy.requests.length <= 3, "an aborted call is not retried");
    } finally {
      await proxy.down();
    }
  });
});
