import type { Clock, Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { AttemptPreparer } from "../attempt-preparer.ts";
import type { Allocation, Workload } from "../models.ts";
import type { AttemptIds } from "../ports/admission-store.ts";
import type { AllocationBackend } from "../ports/allocation-backend.ts";
import type { ReconcilerStore } from "../ports/reconciler-store.ts";
import type { ProfileBreakerOptions, ProfileBreakerView } from "./profile-breaker.ts";
import type { BackendHealth } from "./watch.ts";

/**
 * Stages 2 and 3 of the cancel barrier, for whoever runs things inside an allocation (the
 * session layer tells its workers to stop here). Both run again on every tick until the
 * barrier completes, so both must be idempotent. A hook that throws holds the barrier for
 * that workload until the next tick; it never skips a stage.
 */
export interface BarrierHooks {
  /** Ask everything running inside the allocation to stop. */
  cancelTasks(workload: Workload, allocation: Allocation): Promise<void>;
  /**
   * True once nothing of this workload still runs inside the allocation. Must become true
   * once the allocation's processes are gone (or the backend lost them), or the barrier
   * waits forever.
   */
  drained(workload: Workload, allocation: Allocation): Promise<boolean>;
}

/** The one timer port (lib/clock.ts): `run` waits through it; a test fires the period by hand. */
export type { Timers } from "../../lib/clock.ts";

export interface ReconcilerOptions {
  /** `bindReconcilerStore({ db, clock })`, or a wrapper of it (tests inject crashes). */
  readonly store: ReconcilerStore;
  /** When a profile the backend keeps refusing stops being submitted to (profile-breaker.ts). */
  readonly profileBreaker?: ProfileBreakerOptions;
  readonly backend: AllocationBackend;
  /** Derives the submitted spec per attempt, e.g. `preparerByKind({ BATCH: batchPreparer(...) })`. */
  readonly preparer: AttemptPreparer;
  readonly clock: Clock;
  readonly log: Log;
  /**
   * Shortest time between two ticks' starts in `run`, so between two observe calls, however
   * often `wake()` is called: API bursts cannot set the polling rate. Default 1000 ms.
   */
  readonly minIntervalMs?: number;
  /**
   * While ticks change nothing the period doubles from `minIntervalMs` up to this; any
   * change, wake, submission or cancel brings it back to the minimum. Default 30,000 ms.
   */
  readonly maxIntervalMs?: number;
  /**
   * A wake before the next observation is due runs a submission pass (mint and submit only,
   * no listing call) at once; wakes within this many ms of the last pass share the next one.
   * Default 50 ms.
   */
  readonly submitBatchMs?: number;
  /**
   * With a backend that reports changes (ChangeReporter), a tick looks only at what
   * changed (reconciler/focus.ts); at least this often it looks at every live workload and
   * observes them all, the safety net. Default 60,000 ms. Other backends: every tick is full.
   */
  readonly fullObserveIntervalMs?: number;
  /** Submit/cancel commands in flight at most (reconciler/lanes.ts). Default 4, at least 2. */
  readonly maxCommandsInFlight?: number;
  /** A backend call in flight longer than this marks the backend degraded. Default 1000 ms. */
  readonly slowCallMs?: number;
  /** Default: cancelTasks does nothing, drained is immediately true. */
  readonly barrierHooks?: BarrierHooks;
  /** CSPRNG for SubmissionTokens. Default: crypto.getRandomValues. */
  readonly randomBytes?: (n: number) => Uint8Array;
  /** Allocation ids. Default: crypto.randomUUID. */
  readonly newAllocationId?: () => string;
  /** Every wait of the loop, from the composition (tests: a manual timeline). */
  readonly timers: Timers;
  /** Monotonic milliseconds for tick durations. Default: performance.now. */
  readonly monotonicMs?: () => number;
  /**
   * Called at named points inside a tick (see RECONCILER_FAULT_POINTS), so a crash test can
   * kill the process exactly there (e.g. `(p) => faultPoints.hit(p)`). Default: nothing.
   */
  readonly faultPoint?: (name: ReconcilerFaultPoint) => void;
  /** Each tick's report as it ends, failed ones included (the tick histogram); not passes'. */
  readonly onTickEnded?: (report: TickReport) => void;
}

/** Where a crash test may kill a tick. Each sits right after a durable or external effect. */
export const RECONCILER_FAULT_POINTS = [
  /** Tokens and attempts are durable; nothing was submitted. */
  "reconciler.after-mint",
  /** The backend answered submit; nothing of the answer is recorded. */
  "reconciler.after-submit",
  /** Stopping workloads are fenced; tasks not yet cancelled. */
  "reconciler.after-fence",
  /** Cancel was sent to the backend; nothing marked terminal. */
  "reconciler.after-release",
] as const;
export type ReconcilerFaultPoint = (typeof RECONCILER_FAULT_POINTS)[number];

export const BACKEND_OPERATIONS = [
  "observe",
  "findByToken",
  "submit",
  "cancel",
  "pendingTerminalFacts",
  "acknowledgeTerminal",
] as const;
export type BackendOperation = (typeof BACKEND_OPERATIONS)[number];

/** A counter per backend operation, all zero: an operation added above is counted at once. */
export function zeroBackendCounts(): Record<BackendOperation, number> {
  return Object.fromEntries(BACKEND_OPERATIONS.map((op) => [op, 0])) as Record<
    BackendOperation,
    number
  >;
}

/** What one tick did, for `/v1/diagnostics`, metrics and the benchmark. */
export interface TickReport {
  /** Clock time (epoch ms) the tick started. */
  readonly startedAt: number;
  readonly durationMs: number;
  /** Live (non-terminal) workloads read from the store. */
  readonly workloadsConsidered: number;
  /** Backend calls made by this tick, by operation. */
  readonly backendCalls: Readonly<Record<BackendOperation, number>>;
  readonly backendCallsTotal: number;
  /** Some backend call answered Unavailable or threw this tick. */
  readonly backendUnavailable: boolean;
  /** Store steps that moved something (transitions applied, attempts minted, acknowledgements). */
  readonly writes: number;
  readonly attemptsMinted: number;
  readonly submitted: number;
  /** Set when a store failure aborted the tick (the next tick starts over). */
  readonly error: string | null;
  /** Submit/cancel commands still in flight when the tick ended (it did not wait for them). */
  readonly commandsInFlight: number;
  /** Period `run` waits before the next unwoken tick (back-off while nothing changes). */
  readonly nextIntervalMs: number;
}

export interface ReconcileOnceOptions {
  /**
   * Default true: also wait until the submit and cancel commands this tick started have
   * answered and their answers are recorded (and reject if one of them failed). False is
   * what `run` does: the tick returns while its commands are still in flight.
   */
  readonly waitForCommands?: boolean;
}

export interface Reconciler {
  /** One tick. Never overlaps another tick; rejects when the store failed mid-tick. */
  reconcileOnce(options?: ReconcileOnceOptions): Promise<TickReport>;
  /**
   * Ticks on its schedule (reconciler.ts: the period, pulled earlier by wakes, settled
   * commands and due warnings) and passes on wakes, until `signal` aborts; resolves once the
   * tick in progress has finished (graceful shutdown). A failed tick is logged and the loop
   * goes on.
   */
  run(signal: AbortSignal): Promise<void>;
  /** A workload was created or asked to stop: tick now (coalesced) instead of at the period. */
  wake(): void;
  /** Identity for a new attempt, minted where the reconciler mints its own. */
  newAttemptIds(): AttemptIds;
  /**
   * A workload was just admitted, with its first attempt minted in the same transaction (its
   * token durable, never handed to the backend) or without one. The attempt goes to the
   * backend at once, without a token lookup, when a submit lane is free and the backend is
   * answering; otherwise a pass submits it soon (still without a lookup while this process
   * lives). Without an attempt this is `wake()`.
   */
  admitted(workload: Workload, attempt: Allocation | null): void;
  /** The last finished tick, or null before the first. */
  lastTick(): TickReport | null;
  /** Health as seen from the calls themselves: degraded the moment one is slow or failed. */
  backendHealth(): BackendHealth;
  /** Backend calls started, per second over the last minute, and in total by operation. */
  backendCallRate(): BackendCallRate;
  /**
   * When the backend last confirmed this allocation's phase (epoch ms), or null: not since
   * this process started (reconciler/confirmations.ts).
   */
  phaseConfirmedAt(allocationId: string): number | null;
  /** Profiles the backend refused since they last succeeded; Open ones are degraded. */
  profileBreakers(): readonly ProfileBreakerView[];
  /** Submit/cancel commands in flight now. */
  commandsInFlight(): number;
  /** Resolves once no command is in flight. */
  idle(): Promise<void>;
  /**
   * Before the store closes: admitted attempts still waiting for their turn are not sent
   * (they stay SUBMITTING with their token, for the next start to take: INV-8). Without it a
   * turn that came after the close read a closed database.
   */
  close(): void;
}

export interface BackendCallRate {
  readonly perSecond: number;
  readonly totals: Readonly<Record<BackendOperation, number>>;
}
