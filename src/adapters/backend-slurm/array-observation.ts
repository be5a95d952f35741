/**
 * A job array's rows (the queue's, then accounting's for elements the controller has
 * already forgotten) into one observation: each element read by the same state table as a
 * single job, then summarised by the core's rules (array/array-summary.ts). Pure: the backend
 * does the two listings, this only reads them.
 */
import { type ElementState, summarizeArray } from "../../core/array/array-summary.ts";
import { isTerminal } from "../../core/models.ts";
import type { AllocationObservation } from "../../core/ports.ts";
import type { ArrayTask } from "./array-job-id.ts";

export interface ArrayElementState extends ElementState {
  readonly startedAt: number | null;
  readonly endedAt: number | null;
}

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

/** The array's observation: its phase by the summary's rules, its times from its elements. */
export function arrayObservation(
  size: number,
  elements: ReadonlyMap<number, ArrayElementState>,
): AllocationObservation {
  const summary = summarizeArray(size, elements);
  let startedAt: number | null = null;
  let endedAt: number | null = null;
  for (const e of elements.values()) {
    if (e.startedAt !== null && (startedAt === null || e.startedAt < startedAt)) {
      startedAt = e.startedAt;
    }
    if (e.endedAt !== null && (endedAt === null || e.endedAt > endedAt)) endedAt = e.endedAt;
  }
  const ended = isTerminal(summary.phase);
  return {
    kind: "Observed",
    phase: summary.phase,
    reason: summary.reason,
    message: summary.message,
    exitCode: summary.exitCode,
    startedAt: summary.phase === "QUEUED" ? null : startedAt,
    endedAt: ended ? endedAt : null,
    array: summary,
  };
}
