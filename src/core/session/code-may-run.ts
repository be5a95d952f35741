/**
 * When a session may run a user's code, for every way code reaches its kernel (the native
 * exec API and the Jupyter gateway): READY is TRUE, or FALSE only because the kernel died.
 * A session whose workspace was never confirmed must not run code where the user's data is
 * not; a dead kernel is the one exception, since the next request is what restarts it and
 * refusing it would leave the session dead for good. And the code goes to the allocation of
 * the workload's CURRENT attempt, never an older one.
 */
import type { Allocation, Workload } from "../models.ts";
import type { SessionStore } from "../ports/session-store.ts";
import { KERNEL_DIED } from "./readiness-conditions.ts";

export type CodeMayRun =
  | { readonly kind: "Yes" }
  /** Why not: the READY condition's reason and message, or that it was never evaluated. */
  | { readonly kind: "No"; readonly why: string };

export function codeMayRun(
  store: Pick<SessionStore, "listConditions">,
  workloadId: string,
): CodeMayRun {
  const conditions = store.listConditions(workloadId);
  const ready = conditions.find((c) => c.type === "READY");
  const kernel = conditions.find((c) => c.type === "KERNEL_RESPONSIVE");
  const onlyKernelDied = ready?.reason === "KERNEL_RESPONSIVE" && kernel?.reason === KERNEL_DIED;
  if (ready?.status === "TRUE" || onlyKernelDied) return { kind: "Yes" };
  return {
    kind: "No",
    why: ready ? `${ready.reason}: ${ready.message}` : "readiness not evaluated yet",
  };
}

/** The allocation of the workload's current attempt, when it is RUNNING. */
export function runningCurrentAllocation(
  store: Pick<SessionStore, "listAllocations">,
  workload: Workload,
): Allocation | null {
  const current = store
    .listAllocations(workload.id)
    .find((a) => a.epoch === workload.executionEpoch);
  return current?.phase === "RUNNING" ? current : null;
}
