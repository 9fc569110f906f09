/** The writer API as typed async calls: what MCP servers use to store and resume streams. */

import { type ClientOptions, ServiceClient } from "./connection.js";
import {
  type AppendResult,
  type EventPage,
  type Generation,
  type GenerationReason,
  type LeaseRenewal,
  type NewEvent,
  parseAppendResult,
  parseEventPage,
  parseGeneration,
  parseLeaseRenewal,
  parseResumeAnswer,
  parseStreamView,
  type ResumeAnswer,
  type StoredEvent,
  type StreamView,
} from "./models.js";
import { follow, type FollowOptions, type LiveEvent } from "./live.js";

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call (and its retries) with the signal's reason. */
  readonly signal?: AbortSignal | undefined;
}

/** What a new generation is opened with (all optional). */
export interface OpenOptions extends CallOptions {
  readonly reason?: GenerationReason | undefined;
  readonly producer?: string | undefined;
  readonly maxEvents?: number | undefined;
  readonly ttlSeconds?: number | undefined;
  /** The writer lease (the service's default, 30 s, when unset): renewed by every append and
   *  by `renewLease`; once it runs out the generation is abandoned. */
  readonly leaseSeconds?: number | undefined;
  /** Events the writer may show past its acknowledged tail (default 0): a claim that far
   *  beyond the tail is a lost tail, not an invalid one. */
  readonly pipeline?: number | undefined;
}

/** How a batch is appended. */
export interface AppendOptions extends CallOptions {
  /** The seq the batch must start at: makes the append idempotent, and so retried. */
  readonly firstSeq?: number | undefined;
  /** Make the batch's last event (or, with no events, the tail) the generation's terminal one. */
  readonly terminal?: boolean | undefined;
}

/** Where a resume is asked, and how many events its first page holds. */
export interface ResumeOptions extends CallOptions {
  /** Ask on this stream's route; without it, `/v1/resume` finds the stream from the id. */
  readonly streamId?: string | undefined;
  readonly limit?: number | undefined;
}

/** Which events of a generation a page holds. */
export interface PageOptions extends CallOptions {
  readonly after?: number | undefined;
  readonly limit?: number | undefined;
  /** Seconds to wait for an event when there is none yet (a long-poll). */
  readonly wait?: number | undefined;
}

/** Options of `EventLogClient`: how to reach the service, or a shared connection. */
export type EventLogClientOptions = ClientOptions;

const segment = encodeURIComponent;

/**
 * A typed client for the writer API (`/v1`).
 *
 * Refusals throw the `EventLogError` subclass of their problem code (see `errors.ts`). What is
 * retried (transport errors, 5xx, honouring `Retry-After`) is only what is safe: appends that
 * carry `firstSeq` (a repeat is answered 200 `duplicate`, nothing is stored twice), resume and
 * reads. Opening a generation is never retried: a repeat would open a second one and
 * supersede the first.
 */
export class EventLogClient extends ServiceClient {
  /** Open a new current generation of `streamId`; the previous one is fenced. Never retried. */
  async openGeneration(streamId: string, options: OpenOptions = {}): Promise<Generation> {
    const body: Record<string, string | number> = {};
    if (options.reason !== undefined) body["reason"] = options.reason;
    if (options.producer !== undefined) body["producer"] = options.producer;
    if (options.maxEvents !== undefined) body["max_events"] = options.maxEvents;
    if (options.ttlSeconds !== undefined) body["ttl_seconds"] = options.ttlSeconds;
    if (options.leaseSeconds !== undefined) body["lease_seconds"] = options.leaseSeconds;
    if (options.pipeline !== undefined) body["pipeline"] = options.pipeline;
    const answer = await this.connection.request({
      method: "POST",
      path: `/v1/streams/${segment(streamId)}/generations`,
      json: body,
      retry: false,
      signal: options.signal,
    });
    return parseGeneration(answer);
  }

  /** Append a batch atomically; retried only when `firstSeq` makes a repeat idempotent. */
  async append(
    generation: string,
    events: readonly NewEvent[],
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    const answer = await this.connection.request({
      method: "POST",
      path: `/v1/generations/${segment(generation)}/events`,
      json: {
        events: events.map((e) => ({ data: e.data, event: e.event ?? null })),
        first_seq: options.firstSeq ?? null,
        terminal: options.terminal ?? false,
      },
      retry: options.firstSeq !== undefined,
      signal: options.signal,
    });
    return parseAppendResult(answer);
  }

  /** Renew `generation`'s writer lease (a writer with nothing to append); retried, since a
   *  renewal twice is a renewal. `abandoned` (409) once the lease has already run out. */
  async renewLease(generation: string, options: CallOptions = {}): Promise<LeaseRenewal> {
    const answer = await this.connection.request({
      method: "POST",
      path: `/v1/generations/${segment(generation)}/lease`,
      json: {},
      retry: true,
      signal: options.signal,
    });
    return parseLeaseRenewal(answer);
  }

  /** The verdict on `lastEventId`, on `streamId`'s route or (without it) `/v1/resume`. */
  async resume(lastEventId: string, options: ResumeOptions = {}): Promise<ResumeAnswer> {
    const body: Record<string, string | number> = { last_event_id: lastEventId };
    if (options.limit !== undefined) body["limit"] = options.limit;
    const path =
      options.streamId === undefined
        ? "/v1/resume"
        : `/v1/streams/${segment(options.streamId)}/resume`;
    const answer = await this.connection.request({
      method: "POST",
      path,
      json: body,
      retry: true,
      signal: options.signal,
    });
    return parseResumeAnswer(answer);
  }

  /**
   * The events of `generation` after seq `after` (default 0); `Evicted` rather than skip any.
   * With `wait` (a long-poll, in seconds), a page that would be empty is answered when an
   * event is appended, the generation ends or is superseded, or `wait` runs out (then empty).
   */
  async page(generation: string, options: PageOptions = {}): Promise<EventPage> {
    const params: Record<string, number> = { after: options.after ?? 0 };
    if (options.limit !== undefined) params["limit"] = options.limit;
    const answer = await this.connection.request({
      method: "GET",
      path: `/v1/generations/${segment(generation)}/events`,
      params,
      retry: true,
      signal: options.signal,
      wait: options.wait,
    });
    return parseEventPage(answer);
  }

  /** Every event of `generation` after seq `after`, in order, page by page. */
  async *eventsAfter(
    generation: string,
    after: number,
    options: Omit<PageOptions, "after" | "wait"> = {},
  ): AsyncGenerator<StoredEvent, void, undefined> {
    let next: number | null = after;
    while (next !== null) {
      const page: EventPage = await this.page(generation, { ...options, after: next });
      yield* page.events;
      next = page.nextAfter;
    }
  }

  /**
   * Follow `streamId` live, on one connection, until the service closes it (see `live.ts`):
   * data events, `reset` and `end` control events, typed. Reconnect with the last event's id
   * to continue exactly. An invalid claim throws its refusal (`UnknownGeneration`,
   * `BeyondTail`, …), a stream with no generation `UnknownStream`.
   */
  follow(
    streamId: string,
    options: FollowOptions = {},
  ): AsyncGenerator<LiveEvent, void, undefined> {
    return follow(this.connection, streamId, options);
  }

  /** The stream and its current generation (`UnknownStream` when there is none). */
  async stream(streamId: string, options: CallOptions = {}): Promise<StreamView> {
    const answer = await this.connection.request({
      method: "GET",
      path: `/v1/streams/${segment(streamId)}`,
      retry: true,
      signal: options.signal,
    });
    return parseStreamView(answer);
  }
}
