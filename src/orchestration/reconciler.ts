/**
 * The reconciler: a level-triggered loop that compares what the store wants (desired) with
 * what the backend reports (observed) and takes at most one step per workload per tick.
 *
 * Wiring (composition root):
 *
 *   const reconciler = createReconciler({
 *     store: bindReconcilerStore({ db, clock }),
 *     backend,                                   // any AllocationBackend
 *     preparer: preparerByKind({ BATCH: batchPreparer({ layout }), SESSION: ... }),
 *     clock, log,
 *     tickIntervalMs: 1000,                      // optional
 *     barrierHooks,                              // optional: the session layer's stages 2-3
 *   });
 *   const done = reconciler.run(shutdown.signal);   // resolves after the current tick
 *   // after creating or cancelling a workload: reconciler.wake()
 *   // for /v1/diagnostics: reconciler.lastTick()
 *
 * What a tick guarantees (INV-8 and friends):
 *  - Per tick at most ONE call each of observe, findByToken, submit and cancel, whatever the
 *    number of workloads (plus the acknowledgement sweep's one listing and one
 *    acknowledgement per newly acknowledgeable fact).
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
import type { SubmissionToken } from "./models.ts";
import { mintSubmissionToken } from "./models.ts";
import { acknowledgeSweep } from "./reconciler/acknowledge.ts";
import { tickBackend } from "./reconciler/backend-calls.ts";
import type { TickEnv } from "./reconciler/env.ts";
import { reconcileTick } from "./reconciler/tick.ts";
import {
  BACKEND_OPERATIONS,
  type BarrierHooks,
  type Reconciler,
  type ReconcilerOptions,
  type TickReport,
  type Timers,
} from "./reconciler/types.ts";

export { bindReconcilerStore, type ReconcilerStore } from "./reconciler/store.ts";
export * from "./reconciler/types.ts";

const DEFAULT_TICK_INTERVAL_MS = 1000;

const noHooks: BarrierHooks = {
  cancelTasks: async () => {},
  drained: async () => true,
};

const globalTimers: Timers = {
  set: (callback, delayMs) => setTimeout(callback, delayMs),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export function createReconciler(options: ReconcilerOptions): Reconciler {
  const tickIntervalMs = options.tickIntervalMs ?? DEFAULT_TICK_INTERVAL_MS;
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

  let last: TickReport | null = null;
  let sweptAtStart = false;
  // Ticks are chained, so a reconcileOnce() during run() waits instead of overlapping.
  let chain: Promise<unknown> = Promise.resolve();
  let running = false;
  let wakeRequested = false;
  let wakeWaiter: (() => void) | null = null;

  async function tick(): Promise<TickReport> {
    const startedAt = clock.now();
    const t0 = monotonicMs();
    const backend = tickBackend(options.backend, log);
    const env: TickEnv = {
      store: options.store,
      backend,
      preparer: options.preparer,
      hooks,
      clock,
      log,
      mintToken,
      newAllocationId,
      faultPoint,
      counters: { writes: 0, minted: 0, submitted: 0 },
      reportedUnknownFacts,
    };
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
      };
    }
    return last;
  }

  function reconcileOnce(): Promise<TickReport> {
    const next = chain.then(tick);
    chain = next.catch(() => {});
    return next;
  }

  function wake(): void {
    wakeRequested = true;
    const waiter = wakeWaiter;
    wakeWaiter = null;
    waiter?.();
  }

  function pause(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      let handle: unknown = null;
      const done = () => {
        if (handle !== null) timers.clear(handle);
        signal.removeEventListener("abort", done);
        wakeWaiter = null;
        resolve();
      };
      wakeWaiter = done;
      signal.addEventListener("abort", done, { once: true });
      handle = timers.set(done, tickIntervalMs);
    });
  }

  async function run(signal: AbortSignal): Promise<void> {
    if (running) throw new Error("reconciler.run() is already running");
    running = true;
    try {
      while (!signal.aborted) {
        wakeRequested = false;
        try {
          await reconcileOnce();
        } catch (error) {
          // A store failure: this tick died half way, which every step is written to
          // survive. The next tick starts over from what was committed.
          log.error("reconciler tick failed", { error: String(error) });
        }
        if (signal.aborted) break;
        // Woken during the tick: the new work is not yet seen, so go again at once.
        if (wakeRequested) continue;
        await pause(signal);
      }
    } finally {
      running = false;
    }
  }

  return { reconcileOnce, run, wake, lastTick: () => last };
}
