/** What a store or a bus reports where its clients can not see: log lines and counts. */

/** Where the store reports what clients can not see. `console` by default. */
export interface StoreLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** Counts a store keeps; pass one object to several stores to count a whole process. */
export interface StoreStats {
  /** Messages stored (priming events included). */
  stored: number;
  /** Messages that went out live but unstored: the service failed, refused or was paused. */
  storeFailures: number;
  /** `Last-Event-ID`s the SDK asked about. */
  replays: number;
  /** Of those, resumed. */
  resumed: number;
  /** Messages sent by resumes. */
  replayedMessages: number;
  /** Of the asked ids, refused (every verdict but resume, and the service unavailable). */
  refused: number;
  /** Appends sent over REST because the append channel could not be opened. */
  channelFallbacks: number;
  /** Pipelined mode: messages whose ids went out and which were never stored (the service
   *  refused their frame, or gave no answer in time): a resume from before them is reset. */
  lost: number;
}

/** A fresh set of zero counts. */
export function newStoreStats(): StoreStats {
  return {
    stored: 0,
    storeFailures: 0,
    replays: 0,
    resumed: 0,
    replayedMessages: 0,
    refused: 0,
    channelFallbacks: 0,
    lost: 0,
  };
}

/** Logs an outage once, when it starts and when it ends, and hands each failure on. */
export class Outage {
  private failures = 0;

  constructor(
    private readonly logger: StoreLogger,
    private readonly what: string,
    private readonly report: (error: Error) => void,
  ) {}

  failed(error: unknown, consequence: string): void {
    if (this.failures === 0) {
      this.logger.warn(`mcp-eventlog: ${this.what} failed (${describe(error)}); ${consequence}`);
    }
    this.failures += 1;
    this.report(error instanceof Error ? error : new Error(String(error)));
  }

  recovered(): void {
    if (this.failures === 0) return;
    this.logger.info(`mcp-eventlog: ${this.what} again, after ${this.failures} failure(s)`);
    this.failures = 0;
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
