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
import { isTerminal, type SubmissionToken } from "../models.ts";
import { createLiveView, type LiveViewChanges } from "./live-view.ts";

export interface ReconcilerStore {
  /** Every workload that is not terminal, with the allocation of its current epoch. */
  loadView(): readonly ReconcileItem[];
  /**
   * The same view with what changed since the previous load (either method), for a tick that
   * works on the changes only. Absent: every tick considers every workload.
   */
  loadViewChanges?(): LiveViewChanges;
  /**
   * Persists new attempts (SUBMITTING, token, epoch + 1) before anything is submitted. One
   * result per input, in order. Writes.
   */
  mintAttempts(inputs: readonly MintAttemptInput[]): readonly MintAttemptResult[];
  /**
   * Compare-and-set transitions; one boolean per input (false: the world moved). Writes. A
   * batch that ends an allocation or a workload is committed durably (fsync); one that only
   * mirrors live progress may be committed without waiting for the fsync (see
   * `mustBeDurable`).
   */
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

/**
 * Whether a batch must survive a power cut by itself. An ending must: the acknowledgement
 * sweep may let the backend forget the fact right after, and a lost ending would then be
 * decided on nothing. Every other step only mirrors what the backend says (progress, a
 * handle, a fence that the cancel barrier writes again, an Unknown that stays unresolved),
 * so losing it in a power cut means the next tick writes it again; mints are always durable
 * (their own op), and their fsync also makes every earlier relaxed commit durable.
 */
export function mustBeDurable(transitions: readonly Transition[]): boolean {
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
    mintAttempts: (inputs) => chunked(inputs, maxBatch, (c) => mintAttempts(deps, c)),
    applyTransitions: (ts) =>
      chunked(ts, maxBatch, (c) => applyTransitions(deps, c, { durable: mustBeDurable(c) })),
    findAllocationsByTokens: (tokens) => findAllocationsByTokens(deps, tokens),
    markAcknowledged: (allocationId) => markAcknowledged(deps, allocationId),
  };
}
