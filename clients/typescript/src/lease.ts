/**
 * Keeps the writer leases of the generations a process writes, however silent its tools.
 *
 * Every open generation has a writer lease (`lease_seconds`, the service's default 30 s);
 * an append renews it, and a generation whose lease runs out is *abandoned*: its readers are
 * told and its appends refused. A `LeaseKeeper` holds the generations its stores write and
 * renews each one that no acknowledged append renewed in the last third of its lease, every
 * third of the shortest lease it holds: all of them at once, as lease frames on the append
 * channel (one burst, answered in order), or REST renewals where there is no channel.
 *
 * - Its timer is unreferenced: it never holds the process open. When the process dies, the
 *   renewals stop and the service marks the generations abandoned after their lease.
 * - A renewal refused for good (`abandoned`, `superseded`, `terminal`, `unknown_generation`)
 *   drops the generation and tells its holder (`onLost`); a failure that may pass (no answer,
 *   5xx) is logged once per outage and tried again at the next tick.
 * - One keeper per append channel (`LeaseKeeper.of`): every store on a channel renews on one
 *   timer, in one burst.
 */

import type { AppendChannel } from "./channel.js";
import { ChannelUnavailable } from "./channel.js";
import type { EventLogClient } from "./client.js";
import { EventLogError, ServiceUnreachable } from "./errors.js";
import type { LeaseRenewal } from "./models.js";
import type { StoreLogger } from "./reporting.js";

/** The service's default writer lease: the pace of renewals until a generation says. */
export const DEFAULT_LEASE_SECONDS = 30;

interface Held {
  readonly leaseMs: number;
  /** When an acknowledged append or a renewal last renewed it (ms since the epoch). */
  renewedAt: number;
  readonly onLost: (error: EventLogError) => void;
}

const KEEPERS = new WeakMap<object, LeaseKeeper>();

/** Renews the leases of the generations it holds (see the module). */
export class LeaseKeeper {
  /** Renewals sent, refused for good, and failed (to be tried again). */
  readonly counts = { renewed: 0, lost: 0, failed: 0 };
  private readonly held = new Map<string, Held>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private periodMs = 0;
  private ticking = false;
  private outage = false;

  constructor(
    private readonly client: EventLogClient,
    private readonly channel: AppendChannel | undefined,
    private readonly logger: StoreLogger,
  ) {}

  /** The keeper of `channel` (shared by every store on it), or a new one for `client`. */
  static of(
    client: EventLogClient,
    channel: AppendChannel | undefined,
    logger: StoreLogger,
  ): LeaseKeeper {
    if (channel === undefined) return new LeaseKeeper(client, undefined, logger);
    let keeper = KEEPERS.get(channel);
    if (keeper === undefined) {
      keeper = new LeaseKeeper(client, channel, logger);
      KEEPERS.set(channel, keeper);
    }
    return keeper;
  }

  /** Generations held now. */
  get size(): number {
    return this.held.size;
  }

  /** Whether `generation` is held. */
  holds(generation: string): boolean {
    return this.held.has(generation);
  }

  /** Renew `generation`'s lease of `leaseSeconds` until `release`; `onLost` when it is lost. */
  hold(generation: string, leaseSeconds: number, onLost: (error: EventLogError) => void): void {
    const leaseMs = Math.max(1, leaseSeconds) * 1000;
    this.held.set(generation, { leaseMs, renewedAt: Date.now(), onLost });
    this.schedule();
  }

  /** An acknowledged append renewed `generation`'s lease just now. */
  renewed(generation: string): void {
    const held = this.held.get(generation);
    if (held !== undefined) held.renewedAt = Date.now();
  }

  /** Stop renewing `generation` (its writer is done with it, or gone). */
  release(generation: string): void {
    this.held.delete(generation);
    if (this.held.size === 0) this.stop();
  }

  /** Renew now every held lease that is a third or more of its way through. */
  async tick(now: number = Date.now()): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const due = [...this.held].filter(([, h]) => now - h.renewedAt >= h.leaseMs / 3 - 50);
      if (due.length === 0) return;
      const shortest = Math.min(...due.map(([, h]) => h.leaseMs));
      const signal = AbortSignal.timeout(Math.max(1_000, shortest / 3));
      let outcomes: Map<string, LeaseRenewal | EventLogError> | undefined;
      if (this.channel !== undefined && !this.channel.fallingBack) {
        try {
          // All at once: one lease frame (per 1,000), renewed by the service in one write.
          outcomes = await this.channel.renewLeases(
            due.map(([generation]) => generation),
            signal,
          );
        } catch (error) {
          if (!(error instanceof ChannelUnavailable)) {
            this.failed(error, due.length);
            return;
          }
        }
      }
      if (outcomes === undefined) {
        outcomes = new Map();
        const each = due.map(async ([generation]) => {
          try {
            outcomes?.set(generation, await this.client.renewLease(generation, { signal }));
          } catch (error) {
            outcomes?.set(generation, asError(error));
          }
        });
        await Promise.all(each);
      }
      for (const [generation, held] of due) {
        const outcome = outcomes.get(generation);
        if (outcome === undefined) continue;
        this.settled(generation, held, outcome);
      }
    } finally {
      this.ticking = false;
    }
  }

  private settled(generation: string, held: Held, outcome: LeaseRenewal | EventLogError): void {
    if (!(outcome instanceof EventLogError)) {
      held.renewedAt = Date.now();
      this.counts.renewed += 1;
      if (this.outage) {
        this.outage = false;
        this.logger.info("mcp-eventlog: writer leases renewed again");
      }
      return;
    }
    if (outcome.status >= 400 && outcome.status < 500) {
      // Refused for good: the generation is abandoned, fenced, finished or unknown.
      if (this.held.get(generation) === held) this.release(generation);
      this.counts.lost += 1;
      held.onLost(outcome);
      return;
    }
    this.failed(outcome, 1);
  }

  private failed(error: unknown, count: number): void {
    this.counts.failed += count;
    if (this.outage) return;
    this.outage = true;
    this.logger.warn(
      `mcp-eventlog: renewing writer leases failed (${describe(error)}); trying again every ` +
        "third of a lease, before the service finds them run out",
    );
  }

  private schedule(): void {
    let shortest = Infinity;
    for (const held of this.held.values()) shortest = Math.min(shortest, held.leaseMs);
    const period = Math.max(100, Math.floor(shortest / 3));
    if (this.timer !== undefined && period === this.periodMs) return;
    this.stop();
    this.periodMs = period;
    this.timer = setInterval(() => void this.tick(), period);
    // A process with nothing else to do exits: the leases then run out, as they should.
    (this.timer as { unref?: () => void }).unref?.();
  }

  private stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.periodMs = 0;
  }
}

function asError(error: unknown): EventLogError {
  if (error instanceof EventLogError) return error;
  return new ServiceUnreachable(0, ServiceUnreachable.code, describe(error), { cause: error });
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
