/**
 * The writer leases one store holds: the generation of each SDK stream is held (renewed by
 * the process's `LeaseKeeper`) while it may still be written, and let go once the stream's
 * requests are all answered, or when the store closes.
 */

import { BoundedMap } from "./bounded.js";
import type { EventLogError } from "./errors.js";
import { DEFAULT_LEASE_SECONDS, type LeaseKeeper } from "./lease.js";
import type { StoreLogger } from "./reporting.js";
import type { McpMessage, StreamId } from "./sdk.js";
import type { StreamState } from "./store-session.js";
import { GET_STREAM, type TransportView } from "./transport.js";

/** The leases of one store's generations (see the module). */
export class StreamLeases {
  /** The generations this store holds leases of, with the SDK stream each one is written for. */
  private readonly leased = new Map<string, StreamId>();
  /** The lease each generation was opened with, as the service answered. */
  private readonly lengths: BoundedMap<string, number>;

  constructor(
    readonly keeper: LeaseKeeper,
    private readonly logger: StoreLogger,
    private readonly asked: number | undefined,
    maxStreams: number,
  ) {
    this.lengths = new BoundedMap(maxStreams);
  }

  /** The lease `generation` was opened with (undefined: the service's default). */
  opened(generation: string, seconds: number | null): void {
    if (seconds !== null) this.lengths.set(generation, seconds);
  }

  /** Keep the lease of the stream's generation while it may still be written, and let it go
   *  once the stream's requests are all answered (the response is stored). */
  after(
    sdkStream: StreamId,
    state: StreamState,
    message: McpMessage,
    transport: TransportView | undefined,
  ): void {
    const generation = state.generation;
    if (generation === undefined) return;
    const answers = "id" in message && ("result" in message || "error" in message);
    if (answers && sdkStream !== GET_STREAM) {
      const requests = transport?.requestsOn(sdkStream) ?? [];
      if (requests.every((id) => state.answered.has(id))) {
        this.release(generation);
        return;
      }
    }
    if (!this.leased.has(generation)) this.hold(sdkStream, state, generation);
  }

  /** Stop renewing `generation`'s lease, if this store holds it. */
  release(generation: string): void {
    if (!this.leased.delete(generation)) return;
    this.keeper.release(generation);
  }

  /** Stop renewing every lease this store holds. */
  releaseAll(): void {
    for (const generation of this.leased.keys()) this.keeper.release(generation);
    this.leased.clear();
  }

  private hold(sdkStream: StreamId, state: StreamState, generation: string): void {
    const seconds = this.lengths.get(generation) ?? this.asked ?? DEFAULT_LEASE_SECONDS;
    this.leased.set(generation, sdkStream);
    this.keeper.hold(generation, seconds, (error: EventLogError) => {
      this.leased.delete(generation);
      if (state.generation !== generation) return;
      this.logger.warn(
        `mcp-eventlog: the writer lease of generation ${generation} (SDK stream ${sdkStream}) ` +
          `was refused (${error.code}); the next message opens a new generation`,
      );
      state.broken = true;
      const pipe = state.pipe;
      if (pipe?.generation === generation && pipe.error === undefined) pipe.close(error);
    });
  }
}
