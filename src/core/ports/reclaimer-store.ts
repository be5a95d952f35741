/**
 * What the lease reclaimer needs from persistence: the live sessions with their attempts,
 * and a way to record the intent to stop one (the cancel barrier does the rest).
 * Implemented by adapters/store-sqlite/stores/reclaimer-store.ts.
 */
import type { Allocation, Reason } from "../models.ts";
import type { ReconcileItem } from "./reconciler-store.ts";

export type RequestStopResult =
  | { readonly kind: "Requested" }
  | { readonly kind: "AlreadyRequested"; readonly reason: Reason }
  | { readonly kind: "AlreadyTerminal" }
  | { readonly kind: "NotFound" };

export interface ReclaimerStore {
  /** Every workload that is not terminal, with the allocation of its current epoch. */
  loadLiveView(): readonly ReconcileItem[];
  /** A workload's attempts, oldest epoch first. */
  listAllocations(workloadId: string): readonly Allocation[];
  /** Records the intent to stop; the first reason wins. Writes. */
  requestStop(workloadId: string, reason: Reason, message: string): RequestStopResult;
}
