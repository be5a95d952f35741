/**
 * A job array attempt's part of the workload's view: its elements as the reconciler last
 * stored them (core/array/array-view.ts) with the cap the workload asked for.
 */
import type { ArrayView } from "../../core/array/array-view.ts";
import type { Allocation, Workload } from "../../core/models.ts";

/** The stored array view with the cap the workload asked for. */
export interface ArrayAllocationView extends ArrayView {
  readonly maxConcurrent: number | null;
}

/**
 * The elements of an array attempt, from the JSON the reconciler stored (array-view.ts).
 * Rebuilt field by field, like every view, so nothing else stored there leaks out.
 */
export function arrayAllocationView(
  a: Allocation,
  maxConcurrent: number | null,
): ArrayAllocationView | null {
  if (a.arrayViewJson === undefined || a.arrayViewJson === null) return null;
  const stored = JSON.parse(a.arrayViewJson) as ArrayView;
  return {
    size: stored.size,
    maxConcurrent,
    counts: stored.counts,
    indices: stored.indices,
    elements: stored.elements.map((e) => ({
      index: e.index,
      phase: e.phase,
      reason: e.reason,
      exitCode: e.exitCode,
    })),
    elementsOmitted: stored.elementsOmitted,
  };
}

/** An array attempt's cap; the spec is decoded only for an array (it is lazy in the store). */
export function arrayCap(workload: Workload, a: Allocation): number | null {
  if (a.arrayViewJson === undefined || a.arrayViewJson === null) return null;
  return workload.spec.maxConcurrent ?? null;
}
