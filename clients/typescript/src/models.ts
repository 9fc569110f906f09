/**
 * What the writer API answers, as typed, read-only values.
 *
 * The client reads the service's JSON into these objects (camelCase names for the contract's
 * snake_case fields); they carry only what the contract promises, and a field a newer service
 * adds is ignored. A body that lacks a promised field is a `MalformedResponse`.
 */

import { isRecord, MalformedResponse } from "./errors.js";

/** The three answers to "may this client resume from this id?". */
export type Verdict = "resume" | "reset" | "invalid";

/** Why a generation was opened. */
export type GenerationReason = "initial" | "failover" | "retry" | "reset";

/** One event to append: its SSE `data` and optional SSE `event` type. */
export interface NewEvent {
  readonly data: string;
  readonly event?: string | null;
}

/** A generation of a stream: its token, its place (epoch), its range and its state. */
export interface Generation {
  readonly streamId: string;
  readonly token: string;
  readonly epoch: number;
  readonly reason: string;
  readonly producer: string | null;
  readonly headSeq: number;
  readonly tailSeq: number;
  readonly terminal: boolean;
  readonly terminalSeq: number | null;
  readonly superseded: boolean;
  readonly expired: boolean;
  readonly createdAt: string;
  readonly supersedes: string | null;
  /** The writer lease's length, and when it runs out (null from a service without leases). */
  readonly leaseSeconds: number | null;
  readonly leaseExpiresAt: string | null;
  /** How many events past its tail the writer may show before they are acknowledged. */
  readonly pipeline: number;
  /** When the service found the writer's lease run out; null while not abandoned. */
  readonly abandonedAt: string | null;
}

/** A renewed writer lease. */
export interface LeaseRenewal {
  readonly generation: string;
  readonly leaseExpiresAt: string | null;
}

/** The ids of an appended batch (or of the stored batch it duplicates). */
export interface AppendResult {
  readonly generation: string;
  readonly eventIds: readonly string[];
  readonly headSeq: number;
  readonly tailSeq: number;
  readonly terminal: boolean;
  readonly duplicate: boolean;
}

/** One stored event, with its id `<token>:<seq>`. */
export interface StoredEvent {
  readonly id: string;
  readonly seq: number;
  readonly event: string | null;
  readonly data: string;
  readonly terminal: boolean;
}

/**
 * The verdict on a `Last-Event-ID` and, when it delivers any, the first page of events.
 *
 * `nextAfter` is set while more events remain: page on with
 * `client.page(generation, { after: nextAfter })` or `client.eventsAfter(...)`.
 */
export interface ResumeAnswer {
  readonly verdict: Verdict;
  readonly reason: string;
  readonly detail: string;
  readonly streamId: string | null;
  readonly lastEventId: string;
  readonly generation: string | null;
  readonly discardClientState: boolean;
  readonly events: readonly StoredEvent[];
  readonly nextAfter: number | null;
  readonly terminal: boolean;
  readonly headSeq: number | null;
  readonly tailSeq: number | null;
}

/** A page of a generation's events; `nextAfter` is set while more remain. */
export interface EventPage {
  readonly generation: string;
  readonly events: readonly StoredEvent[];
  readonly nextAfter: number | null;
  readonly headSeq: number;
  readonly tailSeq: number;
  readonly terminal: boolean;
}

/** A stream and its current generation. */
export interface StreamView {
  readonly streamId: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly generations: number;
  readonly current: Generation | null;
}

/** Reads the fields of one JSON object, failing with `MalformedResponse` on a wrong shape. */
export class Fields {
  private readonly body: Record<string, unknown>;

  constructor(
    body: unknown,
    private readonly what: string,
  ) {
    if (!isRecord(body)) throw this.invalid("is not an object");
    this.body = body;
  }

  str(name: string): string {
    const value = this.body[name];
    if (typeof value !== "string") throw this.invalid(`has no string "${name}"`);
    return value;
  }

  int(name: string): number {
    const value = this.body[name];
    if (typeof value !== "number" || !Number.isInteger(value)) {
      throw this.invalid(`has no integer "${name}"`);
    }
    return value;
  }

  bool(name: string, fallback?: boolean): boolean {
    const value = this.body[name] ?? fallback;
    if (typeof value !== "boolean") throw this.invalid(`has no boolean "${name}"`);
    return value;
  }

  optStr(name: string): string | null {
    const value = this.body[name];
    return value === undefined || value === null ? null : this.str(name);
  }

  optInt(name: string): number | null {
    const value = this.body[name];
    return value === undefined || value === null ? null : this.int(name);
  }

  optObject(name: string): Record<string, unknown> | null {
    const value = this.body[name];
    if (value === undefined || value === null) return null;
    if (!isRecord(value)) throw this.invalid(`has a "${name}" that is not an object`);
    return value;
  }

  list(name: string): readonly unknown[] {
    const value = this.body[name];
    if (!Array.isArray(value)) throw this.invalid(`has no list "${name}"`);
    return value;
  }

  /** A list of event ids (strings). */
  eventIds(name: string): readonly string[] {
    return this.list(name).map((id) => {
      if (typeof id !== "string") throw this.invalid("has a bad event id");
      return id;
    });
  }

  raw(name: string): unknown {
    return this.body[name];
  }

  private invalid(problem: string): MalformedResponse {
    return new MalformedResponse(200, MalformedResponse.code, `the ${this.what} ${problem}`);
  }
}

function verdictOf(value: string): Verdict {
  if (value === "resume" || value === "reset" || value === "invalid") return value;
  throw new MalformedResponse(200, MalformedResponse.code, `unknown verdict "${value}"`);
}

/** Read a Generation object of the contract. */
export function parseGeneration(body: unknown): Generation {
  const f = new Fields(body, "generation");
  return {
    streamId: f.str("stream_id"),
    token: f.str("generation"),
    epoch: f.int("epoch"),
    reason: f.str("reason"),
    producer: f.optStr("producer"),
    headSeq: f.int("head_seq"),
    tailSeq: f.int("tail_seq"),
    terminal: f.bool("terminal"),
    terminalSeq: f.optInt("terminal_seq"),
    superseded: f.bool("superseded", false),
    expired: f.bool("expired", false),
    createdAt: f.str("created_at"),
    supersedes: f.optStr("supersedes"),
    leaseSeconds: f.optInt("lease_seconds"),
    leaseExpiresAt: f.optStr("lease_expires_at"),
    pipeline: f.optInt("pipeline") ?? 0,
    abandonedAt: f.optStr("abandoned_at"),
  };
}

/** Read the answer to a lease renewal (REST or a channel frame). */
export function parseLeaseRenewal(body: unknown): LeaseRenewal {
  const f = new Fields(body, "lease answer");
  return { generation: f.str("generation"), leaseExpiresAt: f.optStr("lease_expires_at") };
}

/** Read an append response. */
export function parseAppendResult(body: unknown): AppendResult {
  const f = new Fields(body, "append answer");
  const eventIds = f.eventIds("event_ids");
  return {
    generation: f.str("generation"),
    eventIds,
    headSeq: f.int("head_seq"),
    tailSeq: f.int("tail_seq"),
    terminal: f.bool("terminal"),
    duplicate: f.bool("duplicate"),
  };
}

/** Read one event of a page or a resume answer. */
export function parseStoredEvent(body: unknown): StoredEvent {
  const f = new Fields(body, "event");
  return {
    id: f.str("id"),
    seq: f.int("seq"),
    event: f.optStr("event"),
    data: f.str("data"),
    terminal: f.bool("terminal"),
  };
}

/** Read a resume response. */
export function parseResumeAnswer(body: unknown): ResumeAnswer {
  const f = new Fields(body, "resume answer");
  return {
    verdict: verdictOf(f.str("verdict")),
    reason: f.str("reason"),
    detail: f.str("detail"),
    streamId: f.optStr("stream_id"),
    lastEventId: f.str("last_event_id"),
    generation: f.optStr("generation"),
    discardClientState: f.bool("discard_client_state"),
    events: f.list("events").map(parseStoredEvent),
    nextAfter: f.optInt("next_after"),
    terminal: f.bool("terminal"),
    headSeq: f.optInt("head_seq"),
    tailSeq: f.optInt("tail_seq"),
  };
}

/** Read a page response. */
export function parseEventPage(body: unknown): EventPage {
  return pageFields(new Fields(body, "page"));
}

/** The fields of a page of events: a generation's, or (with its own) a task attempt's. */
export function pageFields(f: Fields): EventPage {
  return {
    generation: f.str("generation"),
    events: f.list("events").map(parseStoredEvent),
    nextAfter: f.optInt("next_after"),
    headSeq: f.int("head_seq"),
    tailSeq: f.int("tail_seq"),
    terminal: f.bool("terminal"),
  };
}

/** Read a stream response. */
export function parseStreamView(body: unknown): StreamView {
  const f = new Fields(body, "stream");
  const current = f.raw("current");
  return {
    streamId: f.str("stream_id"),
    createdAt: f.str("created_at"),
    updatedAt: f.str("updated_at"),
    generations: f.int("generations"),
    current: current === undefined || current === null ? null : parseGeneration(current),
  };
}
