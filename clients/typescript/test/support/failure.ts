/** The error a call of the client ends with: an `EventLogError`, or the test fails. */

import assert from "node:assert/strict";

import { EventLogError } from "../../src/index.js";

/** Await `promise`, which must reject with an `EventLogError`; return that error. */
export async function failure(promise: Promise<unknown>): Promise<EventLogError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof EventLogError, `not an EventLogError: ${String(error)}`);
    return error;
  }
  assert.fail("the call did not fail");
}
