/**
 * When the backend last confirmed each allocation's phase, as this process heard it: what a
 * view's `phaseConfirmedAt` says, so a client can tell a fresh phase from a stale one. The
 * failure it answers: after a restart a purged job read RUNNING for 90 s before it became
 * LOST, and nothing in the view said that nobody had seen it running since.
 *
 * In memory on purpose: a confirmation is only worth anything while the process that heard
 * it runs (after a restart every live phase is unconfirmed until observed again), and
 * writing a time per observed allocation per tick would turn every steady tick into 10,000
 * row writes. Two ways to confirm:
 *  - an observation of the allocation itself (observe, or a change the feed reported);
 *  - a change feed that answered from a cursor: every allocation the feed has covered since
 *    it started (the targets of the call that started it, and of each call since) did not
 *    change, which confirms it as of that answer.
 */
import { isTerminal } from "../models.ts";
import type { AllocationObservation, ObservationTarget } from "../ports/allocation-backend.ts";

export interface PhaseConfirmations {
  /** An `observe` (or the explicit part of a feed read) answered these at `atMs`. */
  observed(observations: ReadonlyMap<string, AllocationObservation>, atMs: number): void;
  /**
   * A change feed answered at `atMs`: from a null cursor it starts afresh over `targets`,
   * from a cursor it confirms everything it covers and adds `targets`.
   */
  feedAnswered(fromCursor: boolean, targets: readonly ObservationTarget[], atMs: number): void;
  /** Epoch ms of the last confirmation, or null: not since this process started. */
  confirmedAt(allocationId: string): number | null;
}

export function createPhaseConfirmations(): PhaseConfirmations {
  const byAllocation = new Map<string, number>();
  let feedCovers = new Set<string>();
  let feedAtMs: number | null = null;
  return {
    observed(observations, atMs) {
      for (const [id, o] of observations) {
        // Indeterminate is no confirmation: the backend could not say this time.
        if (o.kind !== "Observed") continue;
        // An ended attempt's phase is final (its view shows when it was written): forget it,
        // so the map holds live allocations only.
        if (isTerminal(o.phase)) byAllocation.delete(id);
        else byAllocation.set(id, atMs);
      }
    },
    feedAnswered(fromCursor, targets, atMs) {
      if (!fromCursor) feedCovers = new Set();
      for (const t of targets) feedCovers.add(t.allocationId);
      feedAtMs = atMs;
    },
    confirmedAt(allocationId) {
      const own = byAllocation.get(allocationId) ?? null;
      const fed = feedAtMs !== null && feedCovers.has(allocationId) ? feedAtMs : null;
      if (own === null) return fed;
      return fed === null ? own : Math.max(own, fed);
    },
  };
}
