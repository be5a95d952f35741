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
 * The loop (`run`, drawn in docs/architecture.md): it waits for the earlier of two due
 * times, then runs a tick (read the store, observe the backend, one step per workload) or a
 * submission pass (mint and submit only, no backend read). Events only pull a due time
 * earlier: a wake brings the next tick to the minimum interval after the last one and asks
 * for a pass; a settled submission asks for a tick within the minimum interval from now; a
 * TIME_LIMIT_NEAR coming due (reconciler/runway.ts) pulls the tick to it. Two ticks start at
 * least `minIntervalMs` apart, so the backend is observed at most once per minimum interval
 * whatever the API traffic; while ticks change nothing the period doubles up to
 * `maxIntervalMs`, and anything that happens brings it back to the minimum. Passes closer
 * than `submitBatchMs` share one. The slow period is the safety net of a level-triggered
 * loop, never the only path to a change.
 *
 * Every submission goes through one step, `submitAttempts` (reconciler/submissions.ts),
 * whoever asks: a tick, a pass, or `admitted` (a POST's first attempt, handed over on the next turn).
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
import type { SubmissionToken } from "../models.ts";
import { mintSubmissionToken } from "../models.ts";
import { acknowledgeSweep } from "./acknowledge.ts";
import { createAdmittedQueue } from "./admitted.ts";
import { tickBackend } from "./backend-calls.ts";
import { createPhaseConfirmations } from "./confirmations.ts";
import type { TickEnv } from "./env.ts";
import { createTickFocus } from "./focus.ts";
import { createLanes, type LaneOutcome } from "./lanes.ts";
import { createProfileBreakers, DEFAULT_PROFILE_BREAKER } from "./profile-breaker.ts";
import { createRunwaySchedule, warningLeads } from "./runway.ts";
import { createLoopSchedule, type LoopStep } from "./schedule.ts";
import { submitAttempts } from "./submissions.ts";
import { reconcileSubmissions, reconcileTick } from "./tick.ts";
import {
  BACKEND_OPERATIONS,
  type BarrierHooks,
  type Reconciler,
  type ReconcilerOptions,
  type TickReport,
} from "./types.ts";
import { createBackendWatch } from "./watch.ts";

export type * from "../ports/reconciler-store.ts";
export * from "./types.ts";
export type { BackendHealth } from "./watch.ts";

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

/** Why a wait ended. */
type Resume = "timer" | "wake" | "abort";

/** The injected parts a reconciler runs with, each optional one given its default. */
function withDefaults(options: ReconcilerOptions) {
  const minIntervalMs = Math.max(0, options.minIntervalMs ?? DEFAULT_MIN_INTERVAL_MS);
  const randomBytes =
    options.randomBytes ?? ((n: number) => crypto.getRandomValues(new Uint8Array(n)));
  return {
    minIntervalMs,
    maxIntervalMs: Math.max(minIntervalMs, options.maxIntervalMs ?? DEFAULT_MAX_INTERVAL_MS),
    hooks: options.barrierHooks ?? noHooks,
    mintToken: (): SubmissionToken => mintSubmissionToken(randomBytes),
    newAllocationId: options.newAllocationId ?? (() => crypto.randomUUID()),
    timers: options.timers,
    monotonicMs: options.monotonicMs ?? (() => performance.now()),
    faultPoint: options.faultPoint ?? (() => {}),
  };
}

export function createReconciler(options: ReconcilerOptions): Reconciler {
  const given = withDefaults(options);
  const { minIntervalMs, maxIntervalMs, hooks, mintToken, newAllocationId } = given;
  const { timers, monotonicMs, faultPoint } = given;
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
  // Ticks and passes are chained, so a reconcileOnce() during run() waits instead of overlapping.
  let chain: Promise<unknown> = Promise.resolve();
  let running = false;
  let wakeWaiter: ((why: Resume) => void) | null = null;

  const schedule = createLoopSchedule({
    minIntervalMs,
    maxIntervalMs,
    submitBatchMs: Math.max(0, options.submitBatchMs ?? DEFAULT_SUBMIT_BATCH_MS),
    monotonicMs,
  });

  // Attempts minted by this process and not yet handed to the backend (TickEnv.fresh).
  const fresh = new Set<string>();
  const admittedQueue = createAdmittedQueue({
    store: options.store,
    fresh,
    submit: (group) => submitAttempts(tickEnv([], "pass"), [], group),
    wake: () => wake(),
  });

  /** New attempts wait while the backend is not answering (a pass has no read of its own). */
  const backendQuiet = () => watch.health().kind !== "Healthy" || last?.backendUnavailable === true;

  function tickEnv(started: Promise<LaneOutcome>[], mode: LoopStep): TickEnv {
    let leads: ((profile: string) => number) | null = null;
    const backend = tickBackend(options.backend, log, watch, {
      confirmations,
      nowMs: () => clock.now(),
    });
    return {
      store: options.store,
      backend,
      // A tick holds new attempts when its own reads failed; a pass, on what the calls so far said.
      newAttemptsHeld: mode === "tick" ? () => backend.unavailable : backendQuiet,
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

  function report(env: TickEnv, startedAt: number, t0: number, considered: number): TickReport {
    const calls = { ...env.backend.calls };
    return {
      startedAt,
      durationMs: monotonicMs() - t0,
      workloadsConsidered: considered,
      backendCalls: calls,
      backendCallsTotal: BACKEND_OPERATIONS.reduce((n, op) => n + calls[op], 0),
      backendUnavailable: env.backend.unavailable,
      writes: env.counters.writes,
      attemptsMinted: env.counters.minted,
      submitted: env.counters.submitted,
      error: null,
      commandsInFlight: lanes.inFlight,
      nextIntervalMs: schedule.intervalMs,
    };
  }

  async function tick(started: Promise<LaneOutcome>[]): Promise<TickReport> {
    const startedAt = clock.now();
    const t0 = monotonicMs();
    const env = tickEnv(started, "tick");
    let considered = 0;
    let error: string | null = null;
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
      last = { ...report(env, startedAt, t0, considered), error };
      options.onTickEnded?.(last);
    }
    return last;
  }

  /** A submission pass: no backend read, so its report is not the last tick's. */
  async function pass(): Promise<TickReport> {
    const startedAt = clock.now();
    const t0 = monotonicMs();
    const env = tickEnv([], "pass");
    return report(env, startedAt, t0, await reconcileSubmissions(env));
  }

  function chained(step: () => Promise<TickReport>): Promise<TickReport> {
    const next = chain.then(step);
    chain = next.catch(() => {});
    return next;
  }

  async function reconcileOnce(
    once: { readonly waitForCommands?: boolean } = {},
  ): Promise<TickReport> {
    const started: Promise<LaneOutcome>[] = [];
    const report = await chained(() => tick(started));
    if (once.waitForCommands === false) return report;
    // Every command this tick started, answered and recorded: what a caller that steps the
    // reconciler by hand (tests, benchmarks) means by "one tick".
    const outcomes = await Promise.all(started);
    for (const outcome of outcomes) if (outcome.kind === "Failed") throw outcome.error;
    return report;
  }

  function resume(): void {
    const waiter = wakeWaiter;
    wakeWaiter = null;
    waiter?.("wake");
  }

  function wake(): void {
    schedule.wake();
    resume();
  }

  /**
   * A submission was answered and recorded. Its job was created an instant ago: an
   * observation now would only show it just queued, and would reach the scheduler in the
   * same moment as the submission's own answer and as whoever submitted, looking for it. So
   * the next tick comes within the minimum interval, not at once; a pass runs soon, because
   * the freed lane may let waiting work out.
   */
  function submissionSettled(): void {
    schedule.submissionSettled();
    resume();
  }

  function pause(signal: AbortSignal, delayMs: number): Promise<Resume> {
    return new Promise<Resume>((resolve) => {
      let cancel: (() => void) | null = null;
      const done = (why: Resume) => {
        cancel?.();
        signal.removeEventListener("abort", onAbort);
        wakeWaiter = null;
        resolve(why);
      };
      const onAbort = () => done("abort");
      wakeWaiter = done;
      signal.addEventListener("abort", onAbort, { once: true });
      cancel = timers.after(delayMs, () => done("timer"));
    });
  }

  /** The tick changed or asked for something: poll at the minimum again. */
  function busyTick(report: TickReport | null): boolean {
    if (report === null) return true;
    return report.writes > 0 || report.attemptsMinted > 0 || report.commandsInFlight > 0;
  }

  async function runTick(): Promise<void> {
    const { stirred } = schedule.tickStarted();
    // Clock time this tick started: warnings due by then were this tick's to write.
    const startClockMs = clock.now();
    let report: TickReport | null = null;
    try {
      report = await chained(() => tick([]));
    } catch (error) {
      // A store failure: this tick died half way, which every step is written to
      // survive. The next tick starts over from what was committed.
      log.error("reconciler tick failed", { error: String(error) });
    }
    // The earliest warning still to come, so a backed-off loop writes it on time.
    const warningAt = runway.nextAfter(startClockMs);
    const warningAtMs = warningAt === null ? null : monotonicMs() + (warningAt - clock.now());
    schedule.tickEnded(stirred || busyTick(report), warningAtMs);
  }

  async function runPass(): Promise<void> {
    schedule.passStarted();
    try {
      await chained(pass);
    } catch (error) {
      log.error("reconciler submission pass failed", { error: String(error) });
    }
  }

  async function run(signal: AbortSignal): Promise<void> {
    if (running) throw new Error("reconciler.run() is already running");
    running = true;
    let timerFired = false;
    try {
      while (!signal.aborted) {
        const next = schedule.next();
        const waitMs = next.atMs - monotonicMs();
        // A fired timer means the wait is over, whatever the clock says (a timer may fire a
        // hair early, and tests fire them by hand).
        if (waitMs > 0 && !timerFired) {
          timerFired = (await pause(signal, waitMs)) === "timer";
          continue;
        }
        timerFired = false;
        await (next.step === "pass" ? runPass() : runTick());
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
    admitted: admittedQueue.admitted,
    lastTick: () => last,
    backendHealth: () => watch.health(),
    backendCallRate: () => ({ perSecond: watch.callsPerSecond(), totals: watch.totals() }),
    phaseConfirmedAt: (allocationId) => confirmations.confirmedAt(allocationId),
    profileBreakers: () => breakers.views(),
    commandsInFlight: () => lanes.inFlight + (admittedQueue.waiting > 0 ? 1 : 0),
    idle: () => admittedQueue.drained().then(() => lanes.idle()),
    close: () => admittedQueue.close(),
  };
}
