/**
 * A pipelined writer of one generation: events get their ids at once, commits follow behind.
 *
 * `GenerationPipeline.hand(events)` gives a message's events the generation's next seqs and
 * returns as soon as they are queued, in order, to be appended; a flusher sends them behind,
 * at most one frame in flight per generation, with every message handed meanwhile in the
 * next frame (a batch: one commit for many messages). What holds:
 *
 * - **Order and exactly once.** Seqs are assigned here, in hand order, and every frame
 *   carries `firstSeq`; a frame is never changed once formed, so a resend (the channel's
 *   after a drop, or this writer's after a failed attempt) is the same frame, which the
 *   service stores once and answers `duplicate` when it already has it.
 * - **A bounded window.** At most `window` events are handed and not yet acknowledged (the
 *   `pipeline` the generation was opened with): `hand` waits for acknowledgements past it,
 *   so a writer the service falls behind is slowed, never runs away. A message of more
 *   events than the window is handed only when nothing is outstanding, and `hand` returns
 *   once it is acknowledged (stored per event: the window is never exceeded).
 * - **A visible loss.** A frame that cannot be stored (the service refused it, or gave no
 *   answer for `giveUpAfterMs` of retries) breaks the pipeline: `error` is set, `onBroken`
 *   is called once, every later `hand` throws it, and nothing more is appended to the
 *   generation. Events it had handed out may be missing from the generation's tail: the
 *   service answers a claim of one `reset` (`lost_tail`, `abandoned` or `superseded`), never
 *   `invalid` (the window covers it) and never a splice (nothing is appended after a gap).
 */

import { retryDelayMs, type RetryPolicy } from "./connection.js";
import { EventLogError, InvalidResponse, ServiceUnreachable } from "./errors.js";
import type { AppendResult, NewEvent } from "./models.js";

/** Events of one frame, below the service's `EVENTLOG_MAX_BATCH_EVENTS` (1,000). */
export const MAX_FRAME_EVENTS = 500;
/** About the data of one frame: one message larger than this goes alone. */
export const MAX_FRAME_BYTES = 512 * 1024;

/** Appends one frame (over the channel, or REST where it cannot pass). */
export type FrameSender = (
  generation: string,
  events: readonly NewEvent[],
  firstSeq: number,
) => Promise<AppendResult>;

interface Handed {
  readonly firstSeq: number;
  readonly events: readonly NewEvent[];
}

/** An abort signal, or a function that makes one: called only when something has to wait,
 *  so a write that never waits makes no timer. */
export type LazySignal = AbortSignal | (() => AbortSignal);

/** A deadline `ms` from now whose signal (and timer) is made on first use. */
export function deadline(ms: number): () => AbortSignal {
  const at = Date.now() + ms;
  let made: AbortSignal | undefined;
  return () => (made ??= AbortSignal.timeout(Math.max(0, at - Date.now())));
}

interface Waiter {
  readonly ready: () => boolean;
  readonly wake: () => void;
}

/** Options of a pipeline; see the module. */
export interface PipelineOptions {
  readonly window: number;
  readonly nextSeq?: number;
  /** How long one frame is retried while the service does not answer or answers 5xx. */
  readonly giveUpAfterMs?: number | undefined;
  /** The backoff between a frame's attempts. */
  readonly retry?: RetryPolicy;
  readonly onBroken?: (pipeline: GenerationPipeline, error: EventLogError) => void;
  /** An acknowledged frame renewed the generation's lease. */
  readonly onAcknowledged?: (pipeline: GenerationPipeline) => void;
}

/** The pipelined writer of `generation` (see the module). */
export class GenerationPipeline {
  readonly window: number;
  /** The seq the next handed event gets. */
  nextSeq: number;
  /** The generation's tail as acknowledged: every seq up to it is stored. */
  acked: number;
  /** Why the pipeline broke (then nothing more is appended), or undefined. */
  error: EventLogError | undefined;
  /** Frames acknowledged (each one commit of one or more messages). */
  frames = 0;
  /** Frames sent again after an attempt failed (the channel's own resends not counted). */
  retried = 0;
  /** Messages handed out and never acknowledged, once the pipeline broke. */
  lost = 0;
  private readonly pending: Handed[] = [];
  private readonly waiters = new Set<Waiter>();
  private readonly giveUpAfterMs: number;
  private readonly retry: RetryPolicy;
  private flushing = false;
  private closed = false;

  constructor(
    readonly generation: string,
    private readonly send: FrameSender,
    private readonly options: PipelineOptions,
  ) {
    if (!(options.window >= 1)) throw new RangeError("a pipeline window is at least 1 event");
    this.window = options.window;
    this.nextSeq = options.nextSeq ?? 1;
    this.acked = this.nextSeq - 1;
    this.giveUpAfterMs = options.giveUpAfterMs ?? 10_000;
    this.retry = options.retry ?? { attempts: 1_000_000, baseDelayMs: 20, maxDelayMs: 1_000 };
  }

  /** The seq of the last event handed out. */
  get handed(): number {
    return this.nextSeq - 1;
  }

  /** Events handed out and not acknowledged yet. */
  get unacknowledged(): number {
    return this.handed - this.acked;
  }

  /**
   * Queue one message's events (atomically, after everything handed before); resolves with
   * the seq of its last event. Throws the pipeline's `error` once it is broken, or
   * `signal`'s reason when it aborts first (nothing was handed then).
   */
  async hand(events: readonly NewEvent[], signal?: LazySignal): Promise<number> {
    const need = events.length;
    const alone = need > this.window;
    await this.until(
      () =>
        this.error !== undefined ||
        this.unacknowledged + need <= this.window ||
        (alone && this.unacknowledged === 0),
      signal,
    );
    if (this.error !== undefined) throw this.error;
    const handed: Handed = { firstSeq: this.nextSeq, events };
    this.nextSeq += need;
    this.pending.push(handed);
    const last = this.handed;
    this.flush();
    if (alone && !(await this.settle(last, signal))) {
      throw this.error ?? new ServiceUnreachable(0, ServiceUnreachable.code, "not stored in time");
    }
    return last;
  }

  /** Wait until every event up to `seq` (default: all handed so far) is acknowledged; false
   *  when the pipeline broke first or `signal` aborted. */
  async settle(seq: number = this.handed, signal?: LazySignal): Promise<boolean> {
    try {
      await this.until(() => this.error !== undefined || this.acked >= seq, signal);
    } catch {
      return false;
    }
    return this.acked >= seq;
  }

  /** Stop for `error`: nothing more is sent (a frame in flight still lands or not), and
   *  every waiter is woken with the pipeline broken. */
  close(error: EventLogError): void {
    this.closed = true;
    this.breakWith(error);
  }

  private until(ready: () => boolean, lazy: LazySignal | undefined): Promise<void> {
    if (ready()) return Promise.resolve();
    const signal = typeof lazy === "function" ? lazy() : lazy;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.waiters.delete(waiter);
        reject(signal?.reason);
      };
      const waiter: Waiter = {
        ready,
        wake: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.add(waiter);
    });
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) {
      if (waiter.ready() || this.error !== undefined || this.closed) {
        this.waiters.delete(waiter);
        waiter.wake();
      }
    }
  }

  /** Send the pending messages, one frame at a time, until none is left. The first frame
   *  goes out after the current turn of the event loop: a tool that streams messages without
   *  waiting for I/O hands them all in one turn, and they travel in one frame. */
  private flush(): void {
    if (this.flushing) return;
    this.flushing = true;
    nextTurn(() => void this.run());
  }

  private run(): void {
    void this.drain().finally(() => {
      this.flushing = false;
      // A message handed while the last answer was being read starts the next round.
      if (this.pending.length > 0 && this.error === undefined && !this.closed) this.flush();
    });
  }

  private async drain(): Promise<void> {
    while (this.pending.length > 0 && this.error === undefined && !this.closed) {
      const frame = this.nextFrame();
      const ok = await this.sendFrame(frame);
      if (!ok) return;
      this.pending.splice(0, frame.count);
      this.acked = frame.firstSeq + frame.events.length - 1;
      this.frames += 1;
      this.options.onAcknowledged?.(this);
      this.wake();
    }
  }

  /** The next frame: the oldest pending messages, whole, within the frame limits. */
  private nextFrame(): { firstSeq: number; events: NewEvent[]; count: number } {
    const first = this.pending[0] as Handed;
    const events: NewEvent[] = [...first.events];
    let bytes = events.reduce((sum, e) => sum + e.data.length, 0);
    let count = 1;
    for (const next of this.pending.slice(1)) {
      const size = next.events.reduce((sum, e) => sum + e.data.length, 0);
      if (events.length + next.events.length > MAX_FRAME_EVENTS) break;
      if (bytes + size > MAX_FRAME_BYTES) break;
      events.push(...next.events);
      bytes += size;
      count += 1;
    }
    return { firstSeq: first.firstSeq, events, count };
  }

  /** One frame, retried unchanged while the failure may pass; false when it broke. */
  private async sendFrame(frame: { firstSeq: number; events: NewEvent[] }): Promise<boolean> {
    const began = Date.now();
    for (let attempt = 0; ; attempt += 1) {
      if (this.closed) return false;
      try {
        await this.send(this.generation, frame.events, frame.firstSeq);
        return true;
      } catch (error) {
        const final = !passes(error) || Date.now() - began >= this.giveUpAfterMs;
        if (final) {
          this.breakWith(asEventLogError(error));
          return false;
        }
        this.retried += 1;
        await new Promise((resolve) => setTimeout(resolve, retryDelayMs(this.retry, attempt)));
      }
    }
  }

  private breakWith(error: EventLogError): void {
    if (this.error !== undefined) return;
    this.error = error;
    this.lost = this.pending.length;
    this.pending.splice(0);
    this.options.onBroken?.(this, error);
    this.wake();
  }
}

/** Run `task` after the current turn of the event loop (after its I/O callbacks). */
const nextTurn: (task: () => void) => void =
  typeof globalThis.setImmediate === "function"
    ? (task) => void globalThis.setImmediate(task)
    : (task) => void setTimeout(task, 0);

/** Whether a failed attempt may pass if the same frame is sent again: no answer, a 5xx. */
function passes(error: unknown): boolean {
  if (error instanceof InvalidResponse) return false;
  if (!(error instanceof EventLogError)) return true;
  return error.status === 0 || error.status >= 500;
}

function asEventLogError(error: unknown): EventLogError {
  if (error instanceof EventLogError) return error;
  const detail = error instanceof Error ? error.message : String(error);
  return new ServiceUnreachable(0, ServiceUnreachable.code, detail, { cause: error });
}
