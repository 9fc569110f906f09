/**
 * The repository's hostile fake service (`tests/support/hostile_service.py`, the one the
 * Python client's tests drive) as a process a test starts and stops. It picks its
 * misbehaviour by the bearer key (`html`, `gzip-bomb`, `redirect`, `ws-garbage`, …: its
 * module comment has the table), so a client meets one with `{ ...hostile.as(key) }`.
 */

import {
  freePort,
  type Launched,
  launchPython,
  serviceEnv,
  terminate,
  waitHealthy,
} from "./service.js";

/** What the fake sent and received: bytes of each endless body and frames of each `ws-…`
 *  key, and how many requests reached the "other host" its redirects point at. */
export interface HostileState {
  readonly bytes: Readonly<Record<string, number>>;
  readonly frames: Readonly<Record<string, number>>;
  readonly elsewhere: number;
}

export class HostileService {
  private constructor(
    private readonly process_: Launched,
    readonly url: string,
  ) {}

  static async start(): Promise<HostileService> {
    const [port, other] = await Promise.all([freePort(), freePort()]);
    const args = ["-m", "tests.support.hostile_service", "--port", String(port)];
    const launched = launchPython([...args, "--other-port", String(other)], serviceEnv({}));
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitHealthy(url, launched, 60_000, "/hostile/seen");
    } catch (error) {
      await terminate(launched.child);
      throw error;
    }
    return new HostileService(launched, url);
  }

  /** The connection options of a client that meets the misbehaviour `key`. */
  as(key: string): { readonly baseUrl: string; readonly key: string } {
    return { baseUrl: this.url, key };
  }

  async state(): Promise<HostileState> {
    const [seen, sent] = await Promise.all(
      ["/hostile/seen", "/hostile/sent"].map(async (path) => {
        const response = await fetch(this.url + path);
        return (await response.json()) as Record<string, unknown>;
      }),
    );
    return {
      ...(sent as Omit<HostileState, "elsewhere">),
      elsewhere: seen?.["elsewhere"] as number,
    };
  }

  async stop(): Promise<void> {
    await terminate(this.process_.child);
  }
}
