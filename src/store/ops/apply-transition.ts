import { eq } from "drizzle-orm";
import type { ExternalHandle, Phase, Reason } from "../../orchestration/models.ts";
import type { StoreDeps } from "../deps.ts";
import { allocations, events, workloads } from "../schema.ts";

export interface AllocationChange {
  readonly id: string;
  /** Compare-and-set: the change applies only if the allocation is still in this phase. */
  readonly expectedPhase: Phase;
  readonly phase: Phase;
  readonly reason: Reason | null;
  readonly message: string | null;
  readonly handle?: ExternalHandle;
  readonly exitCode?: number | null;
  readonly submittedAt?: number;
  readonly startedAt?: number;
  readonly endedAt?: number;
}

export interface WorkloadChange {
  readonly id: string;
  /** Compare-and-set on the workload's phase and epoch. */
  readonly expectedPhase: Phase;
  readonly expectedEpoch: number;
  readonly phase: Phase;
  readonly reason: Reason | null;
  readonly message: string | null;
  readonly exitCode?: number | null;
}

export interface Transition {
  readonly workload?: WorkloadChange;
  readonly allocation?: AllocationChange;
}

/**
 * One reconciler step's writes, in one transaction: the allocation and/or workload change
 * and an event for each phase that moved. Both sides are compare-and-set, so a step re-run
 * after a crash (or by a second reconciler) that finds the world already moved writes
 * nothing and returns false. Events are only written for a real phase or reason change.
 */
export function applyTransition(deps: StoreDeps, transition: Transition): boolean {
  const now = deps.clock.now();
  return deps.db.transaction((tx) => {
    const a = transition.allocation;
    const w = transition.workload;
    const aRow = a
      ? tx.select().from(allocations).where(eq(allocations.id, a.id)).get()
      : undefined;
    const wRow = w ? tx.select().from(workloads).where(eq(workloads.id, w.id)).get() : undefined;
    if (a && (!aRow || aRow.phase !== a.expectedPhase)) return false;
    if (w && (!wRow || wRow.phase !== w.expectedPhase || wRow.executionEpoch !== w.expectedEpoch)) {
      return false;
    }
    if (a && aRow) {
      tx.update(allocations)
        .set({
          phase: a.phase,
          reason: a.reason,
          message: a.message,
          ...(a.handle !== undefined ? { handle: a.handle } : {}),
          ...(a.exitCode !== undefined ? { exitCode: a.exitCode } : {}),
          ...(a.submittedAt !== undefined ? { submittedAt: a.submittedAt } : {}),
          ...(a.startedAt !== undefined ? { startedAt: a.startedAt } : {}),
          ...(a.endedAt !== undefined ? { endedAt: a.endedAt } : {}),
        })
        .where(eq(allocations.id, a.id))
        .run();
      // Allocation-only transitions are recorded against the workload's event stream too,
      // so `events` tells the whole story of every attempt.
      if (!w && (aRow.phase !== a.phase || aRow.reason !== a.reason)) {
        tx.insert(events)
          .values({
            workloadId: aRow.workloadId,
            allocationId: a.id,
            at: now,
            phase: a.phase,
            reason: a.reason,
            message: a.message,
          })
          .run();
      }
    }
    if (w && wRow) {
      tx.update(workloads)
        .set({
          phase: w.phase,
          reason: w.reason,
          message: w.message,
          updatedAt: now,
          ...(w.exitCode !== undefined ? { exitCode: w.exitCode } : {}),
        })
        .where(eq(workloads.id, w.id))
        .run();
      if (wRow.phase !== w.phase || wRow.reason !== w.reason) {
        tx.insert(events)
          .values({
            workloadId: w.id,
            allocationId: a?.id ?? null,
            at: now,
            phase: w.phase,
            reason: w.reason,
            message: w.message,
          })
          .run();
      }
    }
    return true;
  });
}
