/** A suite's service with a `FaultyProxy` in front of it, and stores that reach it through the
 *  proxy: the set-up the store's suites share. */

import { after, before } from "node:test";

import {
  EventLogClient,
  EventLogEventStore,
  type EventLogEventStoreOptions,
} from "../../src/index.js";
import { Logbook } from "./mcp.js";
import { FaultyProxy } from "./proxy.js";
import { type Backend, type Service, startService } from "./service.js";

/** Two quick tries: a store's calls through a proxy that cuts them. */
export const FAST_RETRY = { attempts: 2, baseDelayMs: 5, maxDelayMs: 20 };

/** What `proxiedService` starts; read it in the suite's tests (it is set before they run). */
export interface Proxied {
  readonly service: Service;
  readonly proxy: FaultyProxy;
  /** A client of the service itself (not through the proxy). */
  readonly log: EventLogClient;
  /** A store through the proxy, quick retries, its own `Logbook`, unless `options` say. */
  store(options?: EventLogEventStoreOptions): EventLogEventStore;
}

/** Start the service on `backend` and a proxy in front of it before the suite's tests, stop
 *  them after: call it inside `describe`. */
export function proxiedService(backend: Backend): Proxied {
  const started: { service?: Service; proxy?: FaultyProxy; log?: EventLogClient } = {};
  const get = <K extends keyof typeof started>(name: K): NonNullable<(typeof started)[K]> => {
    const value = started[name];
    if (value === undefined) throw new Error(`${name} is read before the suite started`);
    return value as NonNullable<(typeof started)[K]>;
  };
  before(async () => {
    started.service = await startService(backend);
    started.proxy = await FaultyProxy.start(started.service.url);
    started.log = new EventLogClient({ baseUrl: started.service.url });
  });
  after(async () => {
    await started.proxy?.down();
    await started.service?.stop();
  });
  return {
    get service() {
      return get("service");
    },
    get proxy() {
      return get("proxy");
    },
    get log() {
      return get("log");
    },
    store(options: EventLogEventStoreOptions = {}): EventLogEventStore {
      return new EventLogEventStore({
        baseUrl: get("proxy").url,
        retry: FAST_RETRY,
        logger: new Logbook(),
        ...options,
      });
    },
  };
}
