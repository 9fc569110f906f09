/** Waiting on conditions (never on fixed sleeps), with generous bounds for a loaded machine. */

/** Resolve once `condition()` holds; reject after `timeoutMs` naming `what`. */
export async function waitFor(
  condition: () => boolean,
  what: string,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A promise with its resolver: a gate a test opens. */
export class Gate {
  readonly opened: Promise<void>;
  private release: () => void = () => undefined;
  isOpen = false;

  constructor() {
    this.opened = new Promise((resolve) => {
      this.release = resolve;
    });
  }

  open(): void {
    this.isOpen = true;
    this.release();
  }
}

/** How long `promise` took to settle, and how. */
export async function timed<T>(
  promise: Promise<T>,
): Promise<{ ms: number; value?: T; error?: unknown }> {
  const start = Date.now();
  try {
    const value = await promise;
    return { ms: Date.now() - start, value };
  } catch (error) {
    return { ms: Date.now() - start, error };
  }
}
