/** Which generation of a bus stream its publishers append to, and where its followers start. */

import type { EventLogClient } from "./client.js";
import { UnknownStream } from "./errors.js";
import type { Generation } from "./models.js";

/** The bus stream's live generation, found (or opened, by a publisher) once and remembered. */
export class BusGeneration {
  private token: string | undefined;
  private finding: Promise<Generation> | undefined;

  constructor(
    private readonly client: EventLogClient,
    private readonly streamId: string,
    private readonly open: { producer: string; maxEvents: number; ttlSeconds?: number | undefined },
  ) {}

  /** The token to append to. */
  async current(): Promise<string> {
    return this.token ?? (await this.find()).token;
  }

  /**
   * Where a follower starts: the tail of the stream's current generation, whatever its state
   * (a finished one: the service then delivers the next generation opened). Only a stream
   * with no generation at all gets one opened here, so that there is something to follow.
   */
  async start(): Promise<string> {
    const current = (await this.look()) ?? (await this.find());
    return `${current.token}:${current.tailSeq}`;
  }

  /** The stream's current generation as it is now (undefined: no stream yet). Opens nothing. */
  async look(): Promise<Generation | undefined> {
    const view = await this.client.stream(this.streamId).catch((error: unknown) => {
      if (error instanceof UnknownStream) return undefined;
      throw error;
    });
    return view?.current ?? undefined;
  }

  /** Forget `token` (or whatever is remembered): the next call reads the stream again. */
  forget(token?: string): void {
    if (token === undefined || this.token === token) this.token = undefined;
  }

  private find(): Promise<Generation> {
    // One look at a time per process: concurrent publishes wait for the same answer.
    this.finding ??= this.lookOrOpen().finally(() => {
      this.finding = undefined;
    });
    return this.finding;
  }

  private async lookOrOpen(): Promise<Generation> {
    const current = await this.look();
    const live = current && !current.terminal && !current.expired ? current : undefined;
    const generation =
      live ??
      (await this.client.openGeneration(this.streamId, {
        reason: current === undefined ? "initial" : "reset",
        ...this.open,
      }));
    this.token = generation.token;
    return generation;
  }
}
