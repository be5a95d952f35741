/**
 * The reconciler: a level-triggered loop that compares what the store wants (desired) with
 * what the backend reports (observed) and takes at most one step per workload per tick.
 *
 * Wiring (composition root):
 *
 *   const reconciler = createReconciler({
 *     store: bindReconcilerStore({ db, clock }), // adapters/store-sqlite/stores: the port's SQLite side
 *     backend,                                   // any AllocationBackend
 *     preparer: preparerByKind({ BATCH: batchPreparer({ layout }), SESSION: ... }),
 *     clock, log,
 *     minIntervalMs: 1000, maxIntervalMs: 30_000, // optional: pacing and back-off
 *     barrierHooks,                              // optional: the session layer's stages 2-3
 *   });
 *   const done = reconciler.run(shutdown.signal);   // resolves after the current tick
 *   // after creating or cancelling a workload: reconciler.wake(); after admitting one with
 *   // its first attempt minted (ids from reconciler.newAttemptIds()): reconciler.admitted(w, a)
 *   // for /v1/diagnostics: reconciler.lastTick()
 *
 * Pacing (`run`): wakes coalesce; two ticks start at least `minIntervalMs` apart, so the
 * backend is observed at most once per minimum interval whatever the API traffic. While
 * ticks change nothing the period doubles up to `maxIntervalMs`; a wake, a write, a
 * submission or a settled command brings it back to the minimum. The slow period is the
 * safety net of a level-triggered loop, never the only path to a change. A running
 * allocation's TIME_LIMIT_NEAR comes due by the clock alone: the loop also wakes at the
 * earliest such due time (reconciler/runway.ts), still at most one tick per minimum interval.
 *
 * What a tick guarantees (INV-8 and friends):
 *  - Per tick at most ONE call each of observe, findByToken, submit and cancel, whatever the
 *    number of workloads (plus the acknowledgement sweep's one listing and one
 *    acknowledgement per newly acknowledgeable fact).
 *  - Submit and cancel run in lanes (reconciler/lanes.ts): the tick starts them and goes on,
 *    so a hung submission never holds observation, cancels or other submissions. An attempt
 *    whose submission is in flight is skipped by later ticks until its answer is recorded.
 *  - Health (reconciler/watch.ts): a call in flight past `slowCallMs` marks the backend
 *    degraded at once, not when it finally times out.
 *  - A SubmissionToken and its attempt (allocation row, executionEpoch) are durable before
 *    submit is called. Created/Existing record the handle; Rejected fails the workload with
 *    SUBMIT_REJECTED and the backend's message; Unknown is never retried blindly: the
 *    allocation stays SUBMITTING without a handle, and every later tick asks findByToken
 *    first. Only a definite Absent allows a new submit, with the same token and allocation.
 *  - BACKEND_UNAVAILABLE (or a backend that throws) changes no phase, and no new attempt is
 *    minted in a tick that heard it.
 *  - Stopping goes through one re-entrant cancel barrier (reconciler/barrier.ts).
 *  - Terminal facts of a TerminalAllocationAcknowledger backend are acknowledged only after
 *    a re-read from the store (reconciler/acknowledge.ts); the "construction" sweep runs at
 *    the start of the first tick (a constructor cannot await), the other at every tick's end.
 *  - Recovery: an attempt that ended LOST, NODE_FAILURE or PREEMPTED, with attempts left,
 *    sends the workload back to PENDING (RETRYING); the next tick mints executionEpoch + 1
 *    with a new token. Never a replay of the old identity.
 *  - Phases: a workload mirrors its current attempt (PENDING → SUBMITTING → QUEUED →
 *    RUNNING → terminal; STOPPING in the barrier). COMPLETED's reason is EXITED_ZERO unless
 *    the backend says otherwise; exit codes are copied to the workload when known.
 */
import type { Allocation, SubmissionToken, Workload } from "./models.ts";
import { mintSubmissionToken } from "./models.ts";
import { acknowledgeSweep } from "./reconciler/acknowledge.ts";
import { tickBackend } from "./reconciler/backend-calls.ts";
import { createPhaseConfirmations } from "./reconciler/confirmations.ts";
import type { TickEnv } from "./reconciler/env.ts";
import { createTickFocus } from "./reconciler/focus.ts";
import { createLanes, type LaneOutcome } from "./reconciler/lanes.ts";
import { createProfileBreakers, DEFAULT_PROFILE_BREAKER } from "./reconciler/profile-breaker.ts";
import { createRunwaySchedule, warningLeads } from "./reconciler/runway.ts";
import { startSubmissions } from "./reconciler/submissions.ts";
import { reconcileSubmissions, reconcileTick } from "./reconciler/tick.ts";
import {
  BACKEND_OPERATIONS,
  type BarrierHooks,
  type Reconciler,
  type ReconcilerOptions,
  type TickReport,
  type Timers,
} from "./reconciler/types.ts";
import { createBackendWatch } from "./reconciler/watch.ts";

export type * from "./ports/reconciler-store.ts";
export * from "./reconciler/types.ts";
export type { BackendHealth } from "./reconciler/watch.ts";

const DEFAULT_MIN_INTERVAL_MS = 1000;
const DEFAULT_MAX_INTERVAL_MS = 30_000;
const DEFAULT_MAX_COMMANDS_IN_FLIGHT = 4;
const DEFAULT_SLOW_CALL_MS = 1000;
const DEFAULT_FULL_OBSERVE_INTERVAL_MS = 60_000;
/** Wakes closer together than this share one submission pass (a burst of POSTs, one batch). */
const DEFAULT_SUBMIT_BATCH_MS = 50;

const noHooks: BarrierHooks = {
  cancelTasks: async () => {},
  drained: async () => true,
};

const globalTimers: Timers = {
  set: (callback, delayMs) => setTimeout(callback, delayMs),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** Why a pause ended. */
type Resume = "timer" | "wake" | "abort";
type Mode = "full" | "submit";

export function createReconciler(options: ReconcilerOptions): Reconciler {
  const minIntervalMs = Math.max(0, options.minIntervalMs ?? DEFAULT_MIN_INTERVAL_MS);
  const maxIntervalMs = Math.max(minIntervalMs, options.maxIntervalMs ?? DEFAULT_MAX_INTERVAL_MS);
  const hooks = options.barrierHooks ?? noHooks;
  const randomBytes =
    options.randomBytes ?? ((n: number) => crypto.getRandomValues(new Uint8Array(n)));
  const mintToken = (): SubmissionToken => mintSubmissionToken(randomBytes);
  const newAllocationId = options.newAllocationId ?? (() => crypto.randomUUID());
  const timers = options.timers ?? globalTimers;
  const monotonicMs = options.monotonicMs ?? (() => performance.now());
  const faultPoint = options.faultPoint ?? (() => {});
  const { log, clock } = options;
  const reportedUnknownFacts = new Set<string>();
  const watch = createBackendWatch({
    slowCallMs: options.slowCallMs ?? DEFAULT_SLOW_CALL_MS,
    monotonicMs,
  });
  const lanes = createLanes({
    maxInFlight: options.maxCommandsInFlight ?? DEFAULT_MAX_COMMANDS_IN_FLIGHT,
    log,
    // A command's answer was recorded (or failed): look at the world again soon.
    onSettled: (kind) => (kind === "submit" ? submissionSettled() : wake()),
  });

  const focus = createTickFocus(
    Math.max(0, options.fullObserveIntervalMs ?? DEFAULT_FULL_OBSERVE_INTERVAL_MS),
  );

  const runway = createRunwaySchedule();
  const confirmations = createPhaseConfirmations();
  const breakers = createProfileBreakers(options.profileBreaker ?? DEFAULT_PROFILE_BREAKER);

  let last: TickReport | null = null;
  let sweptAtStart = false;
  // Ticks are chained, so a reconcileOnce() during run() waits instead of overlapping.
  let chain: Promise<unknown> = Promise.resolve();
  let running = false;
  let wakeRequested = false;
  // Monotonic ms by which the next full tick must start (a settled submission); else Infinity.
  let observeByMs = Number.POSITIVE_INFINITY;
  let wakeWaiter: ((why: Resume) => void) | null = null;
  let intervalMs = minIntervalMs;
  // Set by every wake, cleared by any tick: new work may be waiting to be submitted.
  let submitRequested = false;
  const submitBatchMs = Math.max(0, options.submitBatchMs ?? DEFAULT_SUBMIT_BATCH_MS);

  // Attempts minted by this process and not yet handed to the backend (TickEnv.fresh).
  const fresh = new Set<string>();

  function tickEnv(started: Promise<LaneOutcome>[]): TickEnv {
    let leads: ((profile: string) => number) | null = null;
    return {
      store: options.store,
      backend: tickBackend(options.backend, log, watch, {
        confirmations,
        nowMs: () => clock.now(),
      }),
      preparer: options.preparer,
      hooks,
      clock,
      log,
      mintToken,
      newAllocationId,
      faultPoint,
      counters: { writes: 0, minted: 0, submitted: 0 },
      reportedUnknownFacts,
      lanes,
      fresh,
      started,
      focus,
      // Asked of the backend only when an allocation with a known end time may be due.
      warningLeadMs: (profile) => {
        leads ??= warningLeads(options.backend.profiles());
        return leads(profile);
      },
      runway,
      breakers,
    };
  }

  async function tick(started: Promise<LaneOutcome>[], mode: Mode = "full"): Promise<TickReport> {
    const startedAt = clock.now();
    const t0 = monotonicMs();
    const env = tickEnv(started);
    const backend = env.backend;
    let considered = 0;
    let error: string | null = null;
    if (mode === "submit") {
      // Without a read this pass cannot tell whether the backend answers; a backend that
      // just failed gets no new attempts until a full tick hears from it.
      const report = (considered: number): TickReport => ({
        startedAt,
        durationMs: monotonicMs() - t0,
        workloadsConsidered: considered,
        backendCalls: { ...backend.calls },
        backendCallsTotal: backend.calls.submit,
        backendUnavailable: false,
        writes: env.counters.writes,
        attemptsMinted: env.counters.minted,
        submitted: env.counters.submitted,
        error: null,
        commandsInFlight: lanes.inFlight,
        nextIntervalMs: intervalMs,
      });
      if (watch.health().kind === "Degraded") return report(0);
      return report(await reconcileSubmissions(env));
    }
    try {
      if (!sweptAtStart) {
        // The construction sweep: acknowledgements a previous process committed to the
        // store but died before sending.
        await acknowledgeSweep(env);
        sweptAtStart = true;
      }
      considered = await reconcileTick(env);
    } catch (e) {
      error = String(e);
      throw e;
    } finally {
      const calls = { ...backend.calls };
      last = {
        startedAt,
        durationMs: monotonicMs() - t0,
        workloadsConsidered: considered,
        backendCalls: calls,
        backendCallsTotal: BACKEND_OPERATIONS.reduce((n, op) => n + calls[op], 0),
        backendUnavailable: backend.unavailable,
        writes: env.counters.writes,
        attemptsMinted: env.counters.minted,
        submitted: env.counters.submitted,
        error,
        commandsInFlight: lanes.inFlight,
        nextIntervalMs: intervalMs,
      };
      options.onTickEnded?.(last);
    }
    return last;
  }

  function chainedTick(started: Promise<LaneOutcome>[], mode: Mode = "full"): Promise<TickReport> {
    const next = chain.then(() => tick(started, mode));
    chain = next.catch(() => {});
    return next;
  }

  async function reconcileOnce(
    once: { readonly waitForCommands?: boolean } = {},
  ): Promise<TickReport> {
    const started: Promise<LaneOutcome>[] = [];
    const report = await chainedTick(started);
    if (once.waitForCommands === false) return report;
    // Every command this tick started, answered and recorded: what a caller that steps the
    // reconciler by hand (tests, benchmarks) means by "one tick".
    const outcomes = await Promise.all(started);
    for (const outcome of outcomes) if (outcome.kind === "Failed") throw outcome.error;
    return report;
  }

  function wake(): void {
    wakeRequested = true;
    submitRequested = true;
    const waiter = wakeWaiter;
    wakeWaiter = null;
    waiter?.("wake");
  }

  function admitted(workload: Workload, attempt: Allocation | null): void {
    if (attempt === null) {
      wake();
      return;
    }
    fresh.add(attempt.id);
    // A degraded profile's attempt waits for the tick, which holds it until the back-off.
    if (breakers.state(workload.profile).kind === "Open") {
      wake();
      return;
    }
    // The same gates as a pass: a free lane (a cancel always keeps one), and a backend that
    // answered its last calls. Otherwise the loop's next pass takes it (still lookup-free).
    const answering = watch.health().kind === "Healthy" && last?.backendUnavailable !== true;
    if (!answering || !lanes.hasRoom("submit")) {
      wake();
      return;
    }
    // Not woken as well: a pass started now would only find the attempt busy, and would run
    // before the submission reaches the backend. The lane wakes the loop when it settles.
    void startSubmissions(tickEnv([]), [{ workload, allocation: attempt }]);
  }

  /**
   * A submission was answered and recorded. Its job was created an instant ago: an
   * observation now would only show it just queued, and would reach the scheduler in the
   * same moment as the submission's own answer and as whoever submitted, looking for it. So
   * the next full tick comes within the minimum interval, not at once, and counts as a busy
   * one (the period goes back to the minimum); a pass runs soon, because the freed lane may
   * let waiting work out.
   */
  function submissionSettled(): void {
    submitRequested = true;
    observeByMs = Math.min(observeByMs, monotonicMs() + minIntervalMs);
    const waiter = wakeWaiter;
    wakeWaiter = null;
    waiter?.("wake");
  }

  function pause(signal: AbortSignal, delayMs: number): Promise<Resume> {
    return new Promise<Resume>((resolve) => {
      let handle: unknown = null;
      const done = (why: Resume) => {
        if (handle !== null) timers.clear(handle);
        signal.removeEventListener("abort", onAbort);
        wakeWaiter = null;
        resolve(why);
      };
      const onAbort = () => done("abort");
      wakeWaiter = done;
      signal.addEventListener("abort", onAbort, { once: true });
      handle = timers.set(() => done("timer"), delayMs);
    });
  }

  /** The tick changed or asked for something: poll at the minimum again. */
  function busyTick(report: TickReport | null, woken: boolean): boolean {
    if (woken || report === null) return true;
    return report.writes > 0 || report.attemptsMinted > 0 || report.commandsInFlight > 0;
  }

  /**
   * When (monotonic ms) the next full tick must start for a TIME_LIMIT_NEAR due after the last
   * one started, so a backed-off loop still writes it on time; never sooner than the minimum
   * interval after the last tick (the polling ceiling holds). Infinity when none is due.
   */
  function warningWakeMs(lastStartMs: number, lastStartClockMs: number): number {
    const dueAt = runway.nextAfter(lastStartClockMs);
    if (dueAt === null) return Number.POSITIVE_INFINITY;
    return Math.max(lastStartMs + minIntervalMs, monotonicMs() + (dueAt - clock.now()));
  }

  async function run(signal: AbortSignal): Promise<void> {
    if (running) throw new Error("reconciler.run() is already running");
    running = true;
    let lastStartMs = Number.NEGATIVE_INFINITY;
    let lastSubmitMs = Number.NEGATIVE_INFINITY;
    // Clock time the last full tick started: warnings due by then were that tick's to write.
    let lastStartClockMs = Number.NEGATIVE_INFINITY;
    let timerDue = false;
    try {
      while (!signal.aborted) {
        const fullDueMs = Math.min(
          lastStartMs + (wakeRequested ? minIntervalMs : intervalMs),
          Math.max(observeByMs, lastStartMs + minIntervalMs),
          warningWakeMs(lastStartMs, lastStartClockMs),
        );
        const submitDueMs = submitRequested
          ? lastSubmitMs + submitBatchMs
          : Number.POSITIVE_INFINITY;
        const mode: Mode = submitDueMs < fullDueMs ? "submit" : "full";
        const waitMs = Math.min(fullDueMs, submitDueMs) - monotonicMs();
        // A fired timer means the wait is over, whatever the clock says (a timer may fire a
        // hair early, and tests fire them by hand).
        if (waitMs > 0 && !timerDue) {
          timerDue = (await pause(signal, waitMs)) === "timer";
          continue;
        }
        timerDue = false;
        submitRequested = false;
        if (mode === "submit") {
          lastSubmitMs = monotonicMs();
          try {
            await chainedTick([], "submit");
          } catch (error) {
            log.error("reconciler submission pass failed", { error: String(error) });
          }
          continue;
        }
        const woken = wakeRequested;
        wakeRequested = false;
        const afterSubmission = observeByMs !== Number.POSITIVE_INFINITY;
        observeByMs = Number.POSITIVE_INFINITY;
        lastStartMs = monotonicMs();
        lastStartClockMs = clock.now();
        let report: TickReport | null = null;
        try {
          report = await chainedTick([]);
        } catch (error) {
          // A store failure: this tick died half way, which every step is written to
          // survive. The next tick starts over from what was committed.
          log.error("reconciler tick failed", { error: String(error) });
        }
        intervalMs = busyTick(report, woken || afterSubmission)
          ? minIntervalMs
          : Math.min(maxIntervalMs, Math.max(minIntervalMs, intervalMs * 2, 1));
      }
    } finally {
      running = false;
    }
  }

  return {
    reconcileOnce,
    run,
    wake,
    newAttemptIds: () => ({ allocationId: newAllocationId(), token: mintToken() }),
    admitted,
    lastTick: () => last,
    backendHealth: () => watch.health(),
    backendCallRate: () => ({ perSecond: watch.callsPerSecond(), totals: watch.totals() }),
    phaseConfirmedAt: (allocationId) => confirmations.confirmedAt(allocationId),
    profileBreakers: () => breakers.views(),
    commandsInFlight: () => lanes.inFlight,
    idle: () => lanes.idle(),
  };
}
