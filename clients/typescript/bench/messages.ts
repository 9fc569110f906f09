/** What the store benches send: progress notifications, timed one `storeEvent` at a time. */

/** A progress notification of step `step` (~120 bytes), typed as the caller's SDK types it. */
export function progress<M>(step: number): M {
  return {
    jsonrpc: "2.0",
    method: "notifications/progress",
    params: { progressToken: 7, progress: step, total: 1000, message: `step ${step}` },
  } as M;
}

/** Milliseconds each `storeEvent` took, one after another on one stream. */
export async function perMessage<M>(
  store: { storeEvent(streamId: string, message: M): Promise<unknown> },
  stream: string,
  messages: number,
): Promise<number[]> {
  await store.storeEvent(stream, {} as M); // the priming event opens the generation
  const timings: number[] = [];
  for (let step = 1; step <= messages; step += 1) {
    const message = progress<M>(step);
    const started = performance.now();
    await store.storeEvent(stream, message);
    timings.push(performance.now() - started);
  }
  return timings;
}
