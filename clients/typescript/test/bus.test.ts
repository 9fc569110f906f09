/**
 * `EventLogServerEventBus` against a real service: several buses in this process stand for
 * replicas (each its own client and follower, as in separate processes); the two-process
 * MCP test is `bus-mcp.test.ts`.
 */

import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";

import {
  busStreamId,
  EventLogClient,
  EventLogServerEventBus,
  type EventLogServerEventBusOptions,
  type ServerEvent,
} from "../src/index.js";
import { Logbook } from "./support/mcp.js";
import { FaultyProxy } from "./support/proxy.js";
import { freePort, type Service, startService } from "./support/service.js";
import { waitFor } from "./support/wait.js";

let service: Service;
let log: EventLogClient;
let names = 0;
const buses: EventLogServerEventBus[] = [];

before(async () => {
  service = await startService("sqlite");
  log = new EventLogClient({ baseUrl: service.url });
});

after(async () => {
  await service.stop();
});

afterEach(async () => {
  for (const bus of buses.splice(0)) await bus.close();
});

function bus(options: EventLogServerEventBusOptions = {}): EventLogServerEventBus {
  const made = new EventLogServerEventBus({
    baseUrl: service.url,
    logger: new Logbook(),
    retry: { attempts: 1, baseDelayMs: 1, maxDelayMs: 1 },
    ...options,
  });
  buses.push(made);
  return made;
}

/** A listener that keeps what it hears. */
function ear(target: EventLogServerEventBus): ServerEvent[] {
  const heard: ServerEvent[] = [];
  target.subscribe((event) => heard.push(event));
  return heard;
}

const updated = (uri: string): ServerEvent => ({ kind: "resource_updated", uri });
const uris = (events: ServerEvent[]): string[] =>
  events.map((e) => (e.kind === "resource_updated" ? e.uri : e.kind));

describe("EventLogServerEventBus", () => {
  it("what any replica publishes reaches every replica's listeners once, in one order", async () => {
    const name = `fleet-${(names += 1)}`;
    const [a, b] = [bus({ name }), bus({ name })];
    await Promise.all([a.start(), b.start()]);
    const [heardA, heardB] = [ear(a), ear(b)];
    for (let i = 0; i < 20; i += 1) {
      a.publish(updated(`a/${i}`));
      b.publish(updated(`b/${i}`));
    }
    a.publish({ kind: "tools_list_changed" });
    await waitFor(() => heardA.length === 41 && heardB.length === 41, "every event on both");
    assert.deepEqual(uris(heardA), uris(heardB), "one order on every replica");
    assert.equal(new Set(uris(heardA)).size, 41, "each event once");
    for (const prefix of ["a/", "b/"]) {
      const own = uris(heardA).filter((u) => u.startsWith(prefix));
      assert.deepEqual(
        own,
        Array.from({ length: 20 }, (_, i) => `${prefix}${i}`),
        "publish order",
      );
    }
    assert.deepEqual([a.stats.published, b.stats.published], [21, 20]);
    assert.deepEqual([a.stats.delivered, b.stats.delivered], [41, 41]);
    const page = await log.page((await log.stream(busStreamId(name))).current?.token ?? "");
    assert.ok(page.events.every((e) => e.event === "mcp-server-event"));
  });

  it("a replica that starts later starts at the tail: nothing before it is replayed", async () => {
    const name = `late-${(names += 1)}`;
    const early = bus({ name });
    await early.start();
    for (let i = 0; i < 5; i += 1) early.publish(updated(`before/${i}`));
    await early.flush();
    const late = bus({ name });
    await late.start();
    const heard = ear(late);
    early.publish(updated("after"));
    await waitFor(() => heard.length === 1, "the event after the start");
    assert.deepEqual(uris(heard), ["after"]);
  });

  it("concurrent first publishers open the stream's generation without fencing each other for good", async () => {
    const name = `race-${(names += 1)}`;
    const follower = bus({ name });
    await follower.start();
    const heard = ear(follower);
    const publishers = Array.from({ length: 4 }, () => bus({ name }));
    publishers.forEach((p, i) => p.publish(updated(`p${i}`)));
    await Promise.all(publishers.map((p) => p.flush()));
    assert.deepEqual(
      publishers.map((p) => p.stats.publishFailures),
      [0, 0, 0, 0],
    );
    await waitFor(() => heard.length === 4, "every publisher's event");
    assert.deepEqual(uris(heard).sort(), ["p0", "p1", "p2", "p3"]);
  });

  it("a generation superseded or ended by someone else: publishers and followers go on", async () => {
    const name = `fenced-${(names += 1)}`;
    const [a, b] = [bus({ name }), bus({ name })];
    await Promise.all([a.start(), b.start()]);
    const heard = ear(b);
    a.publish(updated("1"));
    await waitFor(() => heard.length === 1, "the first event");
    await log.openGeneration(busStreamId(name), { reason: "reset" });
    a.publish(updated("2"));
    await waitFor(() => heard.length === 2, "the event after a supersede");
    const current = (await log.stream(busStreamId(name))).current?.token ?? "";
    const ended = await fetch(`${service.url}/admin/v1/generations/${current}/terminate`, {
      method: "POST",
    });
    assert.equal(ended.status, 200);
    a.publish(updated("3"));
    await waitFor(() => heard.length === 3, "the event after an operator ended the generation");
    assert.deepEqual(uris(heard), ["1", "2", "3"]);
    assert.equal(a.stats.publishFailures, 0);
  });

  it("a replica cut off past the retention skips ahead, counting what it missed, and goes on", async () => {
    const name = `behind-${(names += 1)}`;
    const proxy = await FaultyProxy.start(service.url);
    try {
      const logger = new Logbook();
      const slow = bus({ name, baseUrl: proxy.url, maxEvents: 3, logger });
      const writer = bus({ name, maxEvents: 3 });
      await Promise.all([slow.start(), writer.start()]);
      const heard = ear(slow);
      writer.publish(updated("0"));
      await waitFor(() => heard.length === 1, "the first event");
      await proxy.down();
      for (let i = 1; i <= 10; i += 1) writer.publish(updated(String(i)));
      await writer.flush();
      await proxy.up();
      await waitFor(() => uris(heard).includes("10"), "what is still retained");
      writer.publish(updated("11"));
      await waitFor(() => uris(heard).includes("11"), "the events after it");
      assert.deepEqual(
        uris(heard),
        ["0", "8", "9", "10", "11"],
        "what was still retained, then on",
      );
      assert.deepEqual([slow.stats.fellBehind, slow.stats.missed], [1, 7]);
      assert.ok(logger.has("warn", /fell behind .*7 event\(s\) skipped/));
    } finally {
      await proxy.down();
    }
  });

  it("the service unreachable: publish drops and counts, logs once, tells onerror, and never throws", async () => {
    const logger = new Logbook();
    const errors: Error[] = [];
    const away = bus({
      baseUrl: `http://127.0.0.1:${await freePort()}`,
      logger,
      onerror: (error) => errors.push(error),
    });
    for (let i = 0; i < 3; i += 1) away.publish(updated(String(i)));
    await away.flush();
    away.publish(updated("3"));
    await away.flush();
    assert.equal(away.stats.publishFailures, 4);
    assert.equal(away.stats.published, 0);
    assert.equal(logger.lines.filter((l) => /publishing to .* failed/.test(l.message)).length, 1);
    assert.ok(errors.length >= 2);
    await assert.rejects(away.start(), /unreachable|ECONNREFUSED|fetch failed/);
  });

  it("a listener that throws never reaches the SDK, and the others still hear the event", async () => {
    const name = `throws-${(names += 1)}`;
    const errors: Error[] = [];
    const b = bus({ name, onerror: (error) => errors.push(error) });
    await b.start();
    b.subscribe(() => {
      throw new Error("a broken listener");
    });
    const heard = ear(b);
    const unsubscribe = b.subscribe(() => assert.fail("unsubscribed"));
    unsubscribe();
    unsubscribe();
    b.publish({ kind: "prompts_list_changed" });
    await waitFor(() => heard.length === 1, "the event");
    assert.equal(b.stats.listenerErrors, 1);
    assert.match(errors[0]?.message ?? "", /a broken listener/);
  });
});
