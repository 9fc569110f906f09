/**
 * The root of the client's error tree and the base of the service's refusals.
 *
 * Apart from `errors.ts` (which draws the tree and re-exports every class) so that the
 * generated `codes.ts`, whose classes extend `ServiceRefusal`, imports nothing that imports it
 * back (a cycle would leave a class undefined while its subclasses are declared).
 */

/**
 * A request the event-log service refused, or that got no answer this client trusts, or work
 * of this package that cannot go on (a task stopped, a resume refused).
 *
 * `status` is the HTTP status (0 when no response arrived), `code` the stable code, `detail`
 * the human-readable explanation. The message is `<status> <code>: <detail>` unless the class
 * gives its own (`options.message`).
 */
export class EventLogError extends Error {
  /** The code this class stands for. */
  static readonly code: string = "error";

  readonly status: number;
  readonly code: string;
  readonly detail: string;

  constructor(
    status: number,
    code: string,
    detail: string,
    options?: { cause?: unknown; message?: string },
  ) {
    super(options?.message ?? `${status} ${code}: ${detail}`, options);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

/**
 * The service refused the request with a problem `code`: one subclass per code, under the
 * group that says what to do next (`ConflictError`, `RetryLaterError`, …).
 */
export class ServiceRefusal extends EventLogError {
  static override readonly code: string = "refused";
  /** The HTTP statuses the service documents for this code (none, for this base). */
  static readonly statuses: readonly number[] = [];
}

/** A class of the table: constructed with (status, code, detail), with its code and status. */
export type RefusalClass = (new (
  status: number,
  code: string,
  detail: string,
) => ServiceRefusal) & {
  readonly code: string;
  readonly statuses: readonly number[];
};

/**
 * The base a code's class of `codes.ts` extends: its `group`, with the code's `code` and the
 * statuses the service documents for it. One line a code: `export class SeqGap extends
 * refusal(ConflictError, "seq_gap", [409]) {}` is a `ConflictError` whose static `code` is
 * `"seq_gap"`.
 */
export function refusal<G extends typeof ServiceRefusal, C extends string>(
  group: G,
  code: C,
  statuses: readonly number[],
): G & { readonly code: C; readonly statuses: readonly number[] } {
  const base: typeof ServiceRefusal = group;
  return class extends base {
    static override readonly code = code;
    static override readonly statuses = statuses;
  } as unknown as G & { readonly code: C; readonly statuses: readonly number[] };
}
