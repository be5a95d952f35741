/**
 * The SQLite adapter of the core's reconciler port (core/ports/reconciler-store.ts):
 * the store operations the reconciler uses, bound to one database and clock. The daemon
 * builds it and hands it to `createReconciler`; tests wrap it to count or fail writes.
 */
import { isTerminal } from "../../../core/models.ts";
import type { ReconcilerStore, Transition } from "../../../core/ports/reconciler-store.ts";
import type { StoreDeps } from "../deps.ts";
import { markAcknowledged } from "../ops/acknowledge.ts";
import { applyTransitions } from "../ops/apply-transitions.ts";
import { findAllocationsByTokens } from "../ops/find-allocations-by-tokens.ts";
import { decodeSpecs, loadReconcileSnapshot } from "../ops/load-reconcile-snapshot.ts";
import { mintAttempts } from "../ops/mint-attempts.ts";
import { parentStates } from "../ops/parent-states.ts";
import { createLiveView } from "./reconciler-live-view.ts";

export interface BindReconcilerStoreOptions {
  /**
   * Largest number of steps committed in one transaction. Batching turns 10,000 fsyncs into
   * a handful; the cap keeps the write lock short enough that an API request waiting on it
   * (busy_timeout) is delayed by milliseconds, not seconds.
   */
  readonly maxBatch?: number;
  /**
   * Default true: `loadView` keeps the live view in memory and reloads only the workloads
   * written since the last load (reconciler/live-view.ts). False reads everything each time.
   */
  readonly cachedView?: boolean;
}

function chunked<I, O>(
  items: readonly I[],
  size: number,
  run: (chunk: readonly I[]) => readonly O[],
) {
  if (items.length <= size) return run(items);
  const out: O[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...run(items.slice(i, i + size)));
  return out;
}

/**
 * Whether a batch must survive a power cut by itself. An ending must: the acknowledgement
 * sweep may let the backend forget the fact right after, and a lost ending would then be
 * decided on nothing. Every other step only mirrors what the backend says (progress, a
 * handle, a fence that the cancel barrier writes again, an Unknown that stays unresolved),
 * so losing it in a power cut means the next tick writes it again; mints are always durable
 * (their own op), and their fsync also makes every earlier relaxed commit durable.
 */
function mustBeDurable(transitions: readonly Transition[]): boolean {
  return transitions.some(
    (t) =>
      (t.allocation !== undefined && isTerminal(t.allocation.phase)) ||
      (t.workload !== undefined && isTerminal(t.workload.phase)),
  );
}

/** The production binding: the store ops, bound to one database and clock. */
export function bindReconcilerStore(
  deps: StoreDeps,
  options: BindReconcilerStoreOptions = {},
): ReconcilerStore {
  const maxBatch = Math.max(1, options.maxBatch ?? 500);
  const live = options.cachedView === false ? null : createLiveView(deps);
  return {
    loadView: () => (live === null ? loadReconcileSnapshot(deps) : live.load()),
    ...(live === null ? {} : { loadViewChanges: () => live.loadChanges() }),
    decodeSpecs,
    mintAttempts: (inputs) => chunked(inputs, maxBatch, (c) => mintAttempts(deps, c)),
    applyTransitions: (ts) =>
      chunked(ts, maxBatch, (c) => applyTransitions(deps, c, { durable: mustBeDurable(c) })),
    findAllocationsByTokens: (tokens) => findAllocationsByTokens(deps, tokens),
    markAcknowledged: (allocationId) => markAcknowledged(deps, allocationId),
    parentStates: (ids) => parentStates(deps, ids),
  };
}
