/**
 * The store operations the reconciler uses, as one injected object. Injected rather than
 * imported so a test can wrap it and "crash" (throw) at any chosen write, then build a fresh
 * reconciler on the same database: "the tick died half way" is the failure a daemon really
 * meets, and it can only be tested if the writes are countable.
 */

import type { StoreDeps } from "../../store/deps.ts";
import { markAcknowledged } from "../../store/ops/acknowledge.ts";
import type { Transition } from "../../store/ops/apply-transition.ts";
import { applyTransitions } from "../../store/ops/apply-transitions.ts";
import {
  type AllocationWithWorkload,
  findAllocationsByTokens,
} from "../../store/ops/find-allocations-by-tokens.ts";
import { loadReconcileSnapshot } from "../../store/ops/load-reconcile-snapshot.ts";
import type { ReconcileItem } from "../../store/ops/load-reconcile-view.ts";
import type { MintAttemptInput, MintAttemptResult } from "../../store/ops/mint-attempt.ts";
import { mintAttempts } from "../../store/ops/mint-attempts.ts";
import type { SubmissionToken } from "../models.ts";
import { createLiveView } from "./live-view.ts";

export interface ReconcilerStore {
  /** Every workload that is not terminal, with the allocation of its current epoch. */
  loadView(): readonly ReconcileItem[];
  /**
   * Persists new attempts (SUBMITTING, token, epoch + 1) before anything is submitted. One
   * result per input, in order. Writes.
   */
  mintAttempts(inputs: readonly MintAttemptInput[]): readonly MintAttemptResult[];
  /** Compare-and-set transitions; one boolean per input (false: the world moved). Writes. */
  applyTransitions(transitions: readonly Transition[]): readonly boolean[];
  /** Re-reads allocations and their workloads by token (acknowledgement sweep). */
  findAllocationsByTokens(tokens: readonly SubmissionToken[]): readonly AllocationWithWorkload[];
  /** Records that the backend was told it may forget this allocation's terminal fact. Writes. */
  markAcknowledged(allocationId: string): void;
}

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

/** The production binding: the store ops, bound to one database and clock. */
export function bindReconcilerStore(
  deps: StoreDeps,
  options: BindReconcilerStoreOptions = {},
): ReconcilerStore {
  const maxBatch = Math.max(1, options.maxBatch ?? 500);
  const live = options.cachedView === false ? null : createLiveView(deps);
  return {
    loadView: () => (live === null ? loadReconcileSnapshot(deps) : live.load()),
    mintAttempts: (inputs) => chunked(inputs, maxBatch, (c) => mintAttempts(deps, c)),
    applyTransitions: (ts) => chunked(ts, maxBatch, (c) => applyTransitions(deps, c)),
    findAllocationsByTokens: (tokens) => findAllocationsByTokens(deps, tokens),
    markAcknowledged: (allocationId) => markAcknowledged(deps, allocationId),
  };
}
