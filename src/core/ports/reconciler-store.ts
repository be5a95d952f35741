/**
 * What the reconciler needs from persistence, defined by the core so the arrow points from
 * the store to the core and never back: the reconciler reads its view and writes its
 * compare-and-set steps through this interface only. The production adapter binds it to
 * SQLite (adapters/store-sqlite/stores/reconciler-store.ts); tests wrap it to "crash" (throw) at any
 * chosen write, because "the tick died half way" is the failure a daemon really meets and
 * it can only be tested if the writes are countable.
 */
import type { ParentState } from "../dependencies.ts";
import type {
  Allocation,
  ExternalHandle,
  Phase,
  Reason,
  SubmissionToken,
  Workload,
} from "../models.ts";

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
  /** Whether the backend launched it in its verified sandbox (recorded at submission). */
  readonly launchSandboxed?: boolean;
  /** The backend's end time for it (its time limit); null clears it. */
  readonly deadlineAt?: number | null;
  /** When the near-the-limit warning was written (the warning's own event is `notice`). */
  readonly deadlineWarnedAt?: number;
  /** A job array's elements (core/array/array-view.ts); written only when they changed. */
  readonly arrayViewJson?: string;
}

export interface WorkloadChange {
  readonly id: string;
  /** Compare-and-set on the workload's phase and epoch. */
  readonly expectedPhase: Phase;
  readonly expectedEpoch: number;
  readonly phase: Phase;
  readonly reason: Reason | null;
  readonly message: string | null;
  /** The scheduler's own words `message` hides names of, for the admin; absent: none. */
  readonly messageAdmin?: string | null;
  readonly exitCode?: number | null;
}

/** A phase the allocation went through unseen, recorded as an event at the time observed. */
export interface PassedThrough {
  readonly at: number;
  readonly phase: Phase;
  readonly reason: Reason | null;
  readonly message: string | null;
}

export interface Transition {
  readonly workload?: WorkloadChange;
  readonly allocation?: AllocationChange;
  /**
   * Written before the transition's own event when the step applies: a job first seen after
   * it ended still RAN, and the history says so (with the start time the backend observed).
   */
  readonly passedThrough?: PassedThrough;
  /**
   * An event that is news without a phase change (the allocation nears its time limit),
   * written after the transition's own writes when the step applies.
   */
  readonly notice?: PassedThrough;
}

export interface ReconcileItem {
  readonly workload: Workload;
  /** The allocation of the workload's current executionEpoch, if one was minted. */
  readonly current: Allocation | null;
}

export interface MintAttemptInput {
  readonly workloadId: string;
  readonly allocationId: string;
  readonly token: SubmissionToken;
  /** The executionEpoch the caller read; the new attempt gets expectedEpoch + 1. */
  readonly expectedEpoch: number;
  readonly message: string;
}

export type MintAttemptResult =
  | { readonly kind: "Minted"; readonly allocation: Allocation }
  /** Someone else (a previous run of this tick, another reconciler) already moved on. */
  | { readonly kind: "Stale"; readonly message: string };

export interface AllocationWithWorkload {
  readonly allocation: Allocation;
  readonly workload: Workload;
}

/** The live view as a map by workload id, with what changed since the previous load. */
export interface LiveViewChanges {
  /**
   * Every live workload by id. The same map object across loads, updated in place by the
   * next load: read it before the next load, never keep it.
   */
  readonly items: ReadonlyMap<string, ReconcileItem>;
  /**
   * Workloads written since the previous load (by anyone), live or just gone terminal
   * (then absent from `items`). Empty after a rebuild, which `rebuilt` says instead.
   */
  readonly changed: readonly string[];
  /** The whole view was read afresh (the first load): every item is news. */
  readonly rebuilt: boolean;
}

export interface ReconcilerStore {
  /**
   * Every workload that is not terminal, with the allocation of its current epoch. An
   * adapter may defer decoding each workload's `spec` (the tick prepares only a few of
   * them); see `decodeSpecs`.
   */
  loadView(): readonly ReconcileItem[];
  /**
   * The same view with what changed since the previous load (either method), for a tick that
   * works on the changes only. Absent: every tick considers every workload.
   */
  loadViewChanges?(): LiveViewChanges;
  /**
   * Decodes the `spec` of these workloads of the last view now, throwing on a corrupted one.
   * The tick calls it for the workloads it may prepare before its first backend call or
   * write, so a corrupted spec stops the tick before any step instead of half way.
   */
  decodeSpecs(workloads: readonly Workload[]): void;
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
  /**
   * Phase and reason of each of these workloads that exists, live or ended: what a
   * dependent's dependencies are decided on (core/dependencies.ts).
   */
  parentStates(ids: readonly string[]): ReadonlyMap<string, ParentState>;
}
