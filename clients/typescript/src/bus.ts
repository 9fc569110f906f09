/**
 * `EventLogServerEventBus`: the SDK 2.x `ServerEventBus` across replicas, through the service.
 *
 * A 2026-07-28 server's change events (`handler.notify.resourceUpdated(uri)`, …) reach the
 * `subscriptions/listen` streams of every replica: `publish` appends the event to the bus
 * stream `mcp-bus.<name>` (`bus-convention.ts`), and each replica follows that stream live
 * (`GET /v1/streams/{id}/live`) and hands every event, in the stream's order, once, to its
 * local listeners. Shared with the Python bus (`EventLogSubscriptionBus`): a mixed fleet
 * shares one bus.
 *
 * ```ts
 * const bus = new EventLogServerEventBus({ baseUrl: "http://127.0.0.1:8080" });
 * await bus.start(); // following from the tail before any subscription opens
 * const handler = createMcpHandler(factory, { bus });
 * ```
 *
 * - **Fire-and-forget**, as the SDK's contract is: a replica that (re)starts starts at the
 *   tail, nothing is replayed to it; a replica that falls further behind than the retention
 *   (`maxEvents`) skips ahead, and that is counted (`stats.fellBehind`, `stats.missed`)
 *   and logged. A short disconnection loses nothing: the follower reconnects from its last id.
 * - **Publish never throws** (the SDK's `publish` returns nothing, and is called from tools):
 *   an event the service does not take (unreachable, refusing, not the service) is dropped,
 *   counted (`stats.publishFailures`), logged once per outage and handed to `onerror`.
 *   Appends are not retried: without `first_seq` (several publishers share the generation) a
 *   retry after a lost answer could store an event twice. `flush()` waits for what is queued.
 * - **One generation at a time**, the bus stream's current one while it is live; the first
 *   publisher that finds none live opens one (a follower only when the stream has no
 *   generation at all: one it opened could fence one a publisher has just appended to). An append refused `superseded`
 *   (another replica opened one at the same moment), `terminal`, `expired` or
 *   `unknown_generation` re-reads the stream and goes to its current generation, opening one
 *   only when none is live: concurrent openers never fence each other into a loop.
 * - **Listeners never raise into the SDK**: a listener's error is counted, logged and handed
 *   to `onerror`; the other listeners still get the event.
 */

import { EventLogClient } from "./client.js";
import { type ConnectionOptions, retryDelayMs, sleep } from "./connection.js";
import {
  BUS_EVENT_TYPE,
  busStreamId,
  decodeServerEvent,
  encodeServerEvent,
} from "./bus-convention.js";
import {
  BeyondTail,
  EventLogError,
  Expired,
  Superseded,
  TerminalGeneration,
  UnknownGeneration,
  UnknownStream,
} from "./errors.js";
import type { LiveEvent } from "./live.js";
import { BusGeneration } from "./bus-generation.js";
import { Outage, type StoreLogger } from "./reporting.js";
import type { McpServerEventBus, ServerEvent } from "./sdk.js";

/** Counts a bus keeps (of this replica). */
export interface BusStats {
  /** Events appended to the bus stream by this replica. */
  published: number;
  /** Events published here that the service did not take: dropped. */
  publishFailures: number;
  /** Events handed to this replica's listeners. */
  delivered: number;
  /** Listener calls that threw. */
  listenerErrors: number;
  /** Stored events on the bus stream that are not bus events of the convention. */
  skipped: number;
  /** Times this replica fell behind the retention and skipped to the tail. */
  fellBehind: number;
  /** Events known to be skipped so (when the generation stayed the same). */
  missed: number;
  /** Live connections opened after a failed or lost one. */
  reconnects: number;
}

/** Options of `EventLogServerEventBus`; every one has a default. */
export interface EventLogServerEventBusOptions extends ConnectionOptions {
  /** A client to share; otherwise one is built from the connection options. */
  readonly client?: EventLogClient;
  /** The bus's name: its stream is `mcp-bus.<name>`; default `default`. */
  readonly name?: string;
  /** Events the bus generation retains (its `max_events`); default 10,000, as the Python bus. */
  readonly maxEvents?: number;
  /** The bus generation's time to live after its last write (the service's default when unset). */
  readonly ttlSeconds?: number;
  /** Recorded on the generations this bus opens; default `mcp-bus:ts:<pid>`. */
  readonly producer?: string;
  /** Events waiting to be appended, at most; past it a publish is dropped; default 10,000. */
  readonly maxQueued?: number;
  /** The longest live silence before reconnecting (the service beats every 15 s); 60,000. */
  readonly idleTimeoutMs?: number;
  readonly logger?: StoreLogger;
  /** Every failure and listener error, besides the log. */
  readonly onerror?: (error: Error) => void;
}

const MAX_BATCH = 100;
/** Resets after which the service delivers the next generation opened, from seq 1: the
 *  followed one is finished (`terminal`) or purged (`expired`), and publishers open anew. */
const ENDED = new Set(["terminal", "expired"]);
const FOLLOW_RETRY = { attempts: Number.POSITIVE_INFINITY, baseDelayMs: 50, maxDelayMs: 2_000 };

type Listener = (event: ServerEvent) => void;

export class EventLogServerEventBus implements McpServerEventBus {
  readonly client: EventLogClient;
  /** The bus stream: `mcp-bus.<name>`. */
  readonly streamId: string;
  readonly stats: BusStats = {
    published: 0,
    publishFailures: 0,
    delivered: 0,
    listenerErrors: 0,
    skipped: 0,
    fellBehind: 0,
    missed: 0,
    reconnects: 0,
  };
  private readonly listeners = new Set<Listener>();
  private readonly logger: StoreLogger;
  private readonly queue: string[] = [];
  private readonly drained: (() => void)[] = [];
  private readonly stopping = new AbortController();
  private readonly generation: BusGeneration;
  private readonly publishing: Outage;
  private readonly following: Outage;
  private draining = false;
  private follower: Promise<void> | undefined;
  private started: Promise<void> | undefined;

  constructor(private readonly options: EventLogServerEventBusOptions = {}) {
    this.client = options.client ?? new EventLogClient(options);
    this.streamId = busStreamId(options.name);
    this.logger = options.logger ?? console;
    const pid = (globalThis as { process?: { pid?: number } }).process?.pid;
    this.generation = new BusGeneration(this.client, this.streamId, {
      producer: options.producer ?? `mcp-bus:ts:${pid ?? "web"}`,
      maxEvents: options.maxEvents ?? 10_000,
      ttlSeconds: options.ttlSeconds,
    });
    const report = (error: Error): void => this.report(error);
    this.publishing = new Outage(this.logger, `publishing to ${this.streamId}`, report);
    this.following = new Outage(this.logger, `following ${this.streamId}`, report);
  }

  /**
   * Start following the bus stream from its tail; resolves once the live connection is open,
   * so every event published after it reaches this replica's listeners. Rejects with the
   * first attempt's error (the follower keeps trying in the background). `subscribe` starts
   * it too, without waiting: await `start()` before serving to miss nothing.
   */
  start(): Promise<void> {
    this.started ??= new Promise<void>((resolve, reject) => {
      this.follower = this.follow(resolve, reject);
    });
    return this.started;
  }

  /** Append `event` to the bus stream (in the background, in publish order); never throws. */
  publish(event: ServerEvent): void {
    if (this.stopping.signal.aborted) {
      this.dropped(1, new Error("the bus is closed"));
      return;
    }
    let data: string;
    try {
      data = encodeServerEvent(event);
    } catch (error) {
      this.dropped(1, error);
      return;
    }
    if (this.queue.length >= (this.options.maxQueued ?? 10_000)) {
      this.dropped(1, new Error(`${this.queue.length} events are waiting to be appended`));
      return;
    }
    this.queue.push(data);
    if (!this.draining) void this.drain();
  }

  /** Register a listener for every event of the bus; returns an idempotent unsubscribe. */
  subscribe(listener: Listener): () => void {
    const registered: Listener = (event) => listener(event);
    this.listeners.add(registered);
    this.start().catch(() => undefined);
    return () => {
      this.listeners.delete(registered);
    };
  }

  /** Resolves once every event published so far is appended (or dropped). */
  flush(): Promise<void> {
    if (!this.draining && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  /** Stop following; what was published before is still appended (`flush`). */
  async close(): Promise<void> {
    this.stopping.abort(new Error("the bus is closed"));
    await this.follower;
    await this.flush();
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH);
        try {
          await this.append(batch);
          this.stats.published += batch.length;
          this.publishing.recovered();
        } catch (error) {
          this.dropped(batch.length, error);
        }
      }
    } finally {
      this.draining = false;
      for (const resolve of this.drained.splice(0)) resolve();
    }
  }

  private async append(batch: readonly string[]): Promise<void> {
    const events = batch.map((data) => ({ data, event: BUS_EVENT_TYPE }));
    for (let attempt = 1; ; attempt += 1) {
      const token = await this.generation.current();
      try {
        await this.client.append(token, events);
        return;
      } catch (error) {
        const fenced = [Superseded, TerminalGeneration, Expired, UnknownGeneration].some(
          (kind) => error instanceof kind,
        );
        // Someone else's generation is current now: go there (three times at most, so a
        // stream that keeps changing under us is a failure, not a loop).
        if (!fenced || attempt >= 3) throw error;
        this.generation.forget(token);
      }
    }
  }

  private dropped(count: number, error: unknown): void {
    this.stats.publishFailures += count;
    this.publishing.failed(error, `${count} event(s) dropped`);
  }

  /** Follow the bus stream for good: from the tail, reconnecting from the last id held. */
  private async follow(opened: () => void, failed: (error: unknown) => void): Promise<void> {
    let position: string | undefined;
    let failures = 0;
    let first = true;
    while (!this.stopping.signal.aborted) {
      try {
        position ??= await this.generation.start();
        const connection = this.client.follow(this.streamId, {
          lastEventId: position,
          signal: this.stopping.signal,
          idleTimeoutMs: this.options.idleTimeoutMs,
          onOpen: () => {
            if (!first) this.stats.reconnects += 1;
            first = false;
            failures = 0;
            this.following.recovered();
            opened();
          },
        });
        for await (const live of connection) {
          if (live.kind === "event") {
            position = live.id;
            this.deliver(live);
          } else if (live.kind === "reset" && live.generation === null && !ENDED.has(live.reason)) {
            // The service would wait for the next generation opened, while publishers go on
            // appending to the current one: go on in it instead.
            const ahead = await this.skipAhead(position, live.reason);
            if (ahead !== undefined) {
              position = ahead;
              break;
            }
          }
        }
      } catch (error) {
        if (this.stopping.signal.aborted) return;
        if (isBadClaim(error)) {
          // The stream was purged, or the database is another one: start over at the tail.
          position = undefined;
          this.generation.forget();
        }
        if (failures === 0) failed(error);
        this.following.failed(error, "reconnecting");
        await sleep(retryDelayMs(FOLLOW_RETRY, Math.min(failures, 10)), this.stopping.signal).catch(
          () => undefined,
        );
        failures += 1;
      }
    }
  }

  /**
   * A reset with nothing after it, for a generation that is gone from under the follower
   * (evicted, an eviction hole, a newer generation no longer whole: this replica fell behind
   * the retention). On from the oldest event still retained in the live generation (the
   * events skipped are counted when it is the same one); undefined when none is live: then
   * the service's wait for the next generation is right. The follower never opens one here: a
   * generation it opened could fence one a publisher has just appended to.
   */
  private async skipAhead(
    position: string | undefined,
    reason: string,
  ): Promise<string | undefined> {
    const live = await this.generation.look();
    if (live === undefined || live.terminal || live.expired) return undefined;
    const [token, seq] = (position ?? "").split(":");
    const same = token === live.token;
    const next = same ? Math.max(live.headSeq - 1, Number(seq)) : live.headSeq - 1;
    this.stats.fellBehind += 1;
    if (same) this.stats.missed += next - Number(seq);
    this.logger.warn(
      `mcp-eventlog: this replica fell behind ${this.streamId} (${reason}); ` +
        `${same ? next - Number(seq) : "some"} event(s) skipped`,
    );
    return `${live.token}:${next}`;
  }

  private deliver(live: Extract<LiveEvent, { kind: "event" }>): void {
    const event = live.event === BUS_EVENT_TYPE ? decodeServerEvent(live.data) : "not of its type";
    if (typeof event === "string") {
      this.stats.skipped += 1;
      this.logger.warn(
        `mcp-eventlog: ${live.id} on ${this.streamId} is not a bus event (${event})`,
      );
      return;
    }
    this.stats.delivered += 1;
    for (const listener of [...this.listeners]) {
      try {
        listener(event);
      } catch (error) {
        this.stats.listenerErrors += 1;
        this.logger.error(`mcp-eventlog: a bus listener threw: ${describe(error)}`);
        this.report(error);
      }
    }
  }

  private report(error: unknown): void {
    try {
      this.options.onerror?.(error instanceof Error ? error : new Error(String(error)));
    } catch {
      // the callback's own failure must not reach the SDK either
    }
  }
}

function isBadClaim(error: unknown): boolean {
  return (
    error instanceof UnknownGeneration ||
    error instanceof BeyondTail ||
    error instanceof UnknownStream ||
    (error instanceof EventLogError &&
      (error.code === "malformed_id" || error.code === "cross_stream"))
  );
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
