/**
 * One AttemptPreparer per workload kind, behind the single preparer the reconciler takes.
 * A kind without a preparer is refused (the workload fails with INTERNAL_ERROR) rather than
 * submitted underived: a SESSION must never reach a backend without its per-attempt
 * credential and the isolation check its preparer performs.
 */
import type { AttemptPreparer, PrepareResult } from "./attempt-preparer.ts";
import type { Allocation, Workload, WorkloadKind } from "./models.ts";

export function preparerByKind(
  preparers: Readonly<Partial<Record<WorkloadKind, AttemptPreparer>>>,
): AttemptPreparer {
  return {
    prepare(workload: Workload, allocation: Allocation): Promise<PrepareResult> {
      const preparer = preparers[workload.kind];
      if (preparer === undefined) {
        return Promise.resolve({
          kind: "Refused",
          reason: "INTERNAL_ERROR",
          message: `no attempt preparer is configured for ${workload.kind} workloads`,
        });
      }
      return preparer.prepare(workload, allocation);
    },
  };
}
