/**
 * Job arrays: their element rows from the same one squeue per tick, and from the one sacct
 * shared with single jobs for the elements the controller has already forgotten (MinJobAge
 * after each element ended).
 */

import { arrayObservation } from "../../core/array/array-observation.ts";
import type {
  AllocationObservation,
  ObservationTarget,
} from "../../core/ports/allocation-backend.ts";
import { type ArrayElementState, collectElements } from "./array-observation.ts";
import { absent } from "./observe-accounting.ts";
import { carries, fromAccounting, fromQueue } from "./observe-rows.ts";
import type { AccountingRow } from "./parse.ts";
import type { QueueRow } from "./parse-squeue.ts";
import type { SlurmContext } from "./slurm-context.ts";

export interface ArrayReads {
  readonly elements: ReadonlyMap<ObservationTarget, Map<number, ArrayElementState>>;
  /** Arrays with elements the queue did not show: accounting is asked about them. */
  readonly incomplete: readonly ObservationTarget[];
}

export function readArrays(
  ctx: SlurmContext,
  targets: readonly ObservationTarget[],
  elementRowsOf: (handle: string) => readonly QueueRow[],
) {
  const elements = new Map<ObservationTarget, Map<number, ArrayElementState>>();
  const incomplete: ObservationTarget[] = [];
  for (const target of targets) {
    const size = target.arraySize;
    if (size === undefined) continue;
    const found = new Map<number, ArrayElementState>();
    const ours = elementRowsOf(target.handle).filter((r) => carries(r, target.token));
    collectElements(ours, size, (row) => fromQueue(ctx, row), found);
    elements.set(target, found);
    if (found.size < size) incomplete.push(target);
  }
  return { elements, incomplete } satisfies ArrayReads;
}

export function finishArrays(
  ctx: SlurmContext,
  reads: ArrayReads,
  accounting: { readonly rows: readonly AccountingRow[] } | { readonly failed: string } | null,
  observations: Map<string, AllocationObservation>,
): void {
  for (const [target, found] of reads.elements) {
    const size = target.arraySize ?? 0;
    if (accounting !== null && "rows" in accounting) {
      const ours = accounting.rows.filter(
        (r) => r.jobId === target.handle && carries(r, target.token),
      );
      collectElements(ours, size, (row) => fromAccounting(ctx, row), found);
    }
    if (found.size > 0) {
      ctx.absences.delete(target.allocationId);
      observations.set(target.allocationId, arrayObservation(size, found));
    } else if (accounting !== null && "failed" in accounting) {
      observations.set(target.allocationId, {
        kind: "Indeterminate",
        message: `array not in the queue, and accounting did not answer: ${accounting.failed}`,
      });
    } else {
      observations.set(
        target.allocationId,
        absent(ctx, target, "is in neither the queue nor accounting"),
      );
    }
  }
}
