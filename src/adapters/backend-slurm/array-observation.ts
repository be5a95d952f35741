/**
 * A job array's rows (the queue's, then accounting's for elements the controller has
 * already forgotten) into its elements: each element read by the same state table as a
 * single job. Pure: the backend does the two listings, this only reads them; the core's
 * `arrayObservation` (core/array/array-observation.ts) sums the elements up, the same for
 * every backend.
 */
import type { TimedElementState } from "../../core/array/array-observation.ts";
import type { AllocationObservation } from "../../core/ports/allocation-backend.ts";
import type { ArrayTask } from "./array-job-id.ts";

/** An element's state and times: the core's, so the core's `arrayObservation` sums it up. */
export type ArrayElementState = TimedElementState;

/**
 * Adds the elements these rows show to `into`, never replacing one already there (the queue
 * is read first and is the fresher source). Indices at or past `size` are not ours to count.
 */
export function collectElements<R extends { readonly arrayTask?: ArrayTask }>(
  rows: readonly R[],
  size: number,
  observe: (row: R) => AllocationObservation,
  into: Map<number, ArrayElementState>,
): void {
  for (const row of rows) {
    const task = row.arrayTask;
    if (task === undefined) continue;
    const indices = task.kind === "Element" ? [task.index] : task.indices;
    const fresh = indices.filter((i) => i < size && !into.has(i));
    if (fresh.length === 0) continue;
    const o = observe(row);
    // An element whose state cannot be read stays unknown: it keeps the array from ending.
    if (o.kind !== "Observed") continue;
    const state: ArrayElementState = {
      phase: o.phase,
      reason: o.reason,
      exitCode: o.exitCode,
      startedAt: o.startedAt,
      endedAt: o.endedAt,
    };
    for (const i of fresh) into.set(i, state);
  }
}
