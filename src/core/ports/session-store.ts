/**
 * What the sessions engine (readiness loop, exec service, the gateway's expectations) needs
 * from persistence. Defined by the core, implemented by adapters/store-sqlite/stores/session-store.ts, so
 * the session rules can be read, and tested, without the database's vocabulary.
 */
import type { Allocation, Condition, ConditionStatus, ConditionType, Workload } from "../models.ts";
import type { ReconcileItem } from "./reconciler-store.ts";

export interface ConditionUpdate {
  readonly type: ConditionType;
  readonly status: ConditionStatus;
  readonly reason: string;
  readonly message: string;
}

/** Keyset position of the last workload of a page: `(createdAt, id)`. */
export interface WorkloadCursor {
  readonly createdAt: number;
  readonly id: string;
}

export interface SessionPage {
  readonly items: readonly Workload[];
  readonly next: WorkloadCursor | null;
}

export interface SessionStore {
  getWorkload(workloadId: string): Workload | null;
  getAllocation(allocationId: string): Allocation | null;
  /** A workload's attempts, oldest epoch first. */
  listAllocations(workloadId: string): readonly Allocation[];
  listConditions(workloadId: string): readonly Condition[];
  /** Upserts; lastTransitionTime moves only when the status changes. Writes. */
  setCondition(workloadId: string, update: ConditionUpdate): void;
  /** Terminal sessions that still have a condition that is not FALSE. */
  listEndedSessionsWithOpenConditions(): readonly string[];
  /** Every workload that is not terminal, with the allocation of its current epoch. */
  loadLiveView(): readonly ReconcileItem[];
  /** SESSION workloads, newest first, `limit` at a time after `cursor`. */
  listSessions(page: { readonly limit: number; readonly cursor?: WorkloadCursor }): SessionPage;
}
