/**
 * When the loop runs next, and what: the whole of the reconciler's pacing as two due times
 * (monotonic ms) that events only ever pull earlier. `run` (reconciler.ts) waits for the
 * earlier one and runs a tick or a submission pass; docs/architecture.md draws it.
 *
 * The failure it replaces: the loop juggled five due times (the period, a wake's minimum, a
 * settled submission's deadline, a warning's wake and a batch window), recomputed on every
 * turn from flags, and a reader could not say when the next observation would come.
 *
 *  - tick: due one period after the last tick started. The period is the minimum after a
 *    tick that changed or asked for anything (or followed an event), and doubles up to the
 *    maximum while ticks change nothing. A wake pulls it to now, a settled submission to
 *    one minimum from now, a warning coming due to its time; never closer than the minimum
 *    to the last tick's start, so the backend is observed at most once per minimum interval.
 *  - pass: due only when asked (a wake, a settled submission), no sooner than the batch
 *    window after the last pass; a tick answers every pass asked before it.
 */

export type LoopStep = "tick" | "pass";

export interface LoopSchedule {
  /** What runs next and when (monotonic ms; in the past: at once). */
  next(): { readonly step: LoopStep; readonly atMs: number };
  /** New work or a stop (API, a settled cancel): a pass soon, a tick at the minimum. */
  wake(): void;
  /** A submission was answered: its job is looked at within the minimum interval, not at once. */
  submissionSettled(): void;
  /** A tick starts now; whether an event came since the last one (the period resets). */
  tickStarted(): { readonly stirred: boolean };
  /**
   * The tick that started last ended. `busy`: it changed or asked for something (or
   * followed an event). `warningAtMs`: the earliest TIME_LIMIT_NEAR still to come, in
   * monotonic ms, or null. Returns the period now in force.
   */
  tickEnded(busy: boolean, warningAtMs: number | null): number;
  passStarted(): void;
  /** The period now in force (reported as `nextIntervalMs`). */
  readonly intervalMs: number;
}

export interface LoopScheduleOptions {
  readonly minIntervalMs: number;
  readonly maxIntervalMs: number;
  readonly submitBatchMs: number;
  readonly monotonicMs: () => number;
}

export function createLoopSchedule(options: LoopScheduleOptions): LoopSchedule {
  const { minIntervalMs, maxIntervalMs, submitBatchMs, monotonicMs } = options;
  let tickDueMs = Number.NEGATIVE_INFINITY; // the first tick at once
  let passDueMs = Number.POSITIVE_INFINITY;
  let lastTickMs = Number.NEGATIVE_INFINITY;
  let lastPassMs = Number.NEGATIVE_INFINITY;
  let stirred = false;
  let intervalMs = minIntervalMs;

  /** The next tick within `withinMs` from now, never closer than the minimum to the last. */
  const tickWithin = (withinMs: number) => {
    stirred = true;
    const atMs = Math.max(monotonicMs() + withinMs, lastTickMs + minIntervalMs);
    tickDueMs = Math.min(tickDueMs, atMs);
  };
  const askPass = () => {
    passDueMs = Math.min(passDueMs, lastPassMs + submitBatchMs);
  };

  return {
    next: () =>
      passDueMs < tickDueMs ? { step: "pass", atMs: passDueMs } : { step: "tick", atMs: tickDueMs },
    wake() {
      tickWithin(0);
      askPass();
    },
    submissionSettled() {
      tickWithin(minIntervalMs);
      askPass();
    },
    tickStarted() {
      const was = stirred;
      stirred = false;
      // Events during the tick pull these again from here.
      tickDueMs = Number.POSITIVE_INFINITY;
      passDueMs = Number.POSITIVE_INFINITY;
      lastTickMs = monotonicMs();
      return { stirred: was };
    },
    tickEnded(busy, warningAtMs) {
      intervalMs = busy
        ? minIntervalMs
        : Math.min(maxIntervalMs, Math.max(minIntervalMs, intervalMs * 2, 1));
      const dueMs = Math.min(lastTickMs + intervalMs, warningAtMs ?? Number.POSITIVE_INFINITY);
      tickDueMs = Math.min(tickDueMs, Math.max(dueMs, lastTickMs + minIntervalMs));
      return intervalMs;
    },
    passStarted() {
      passDueMs = Number.POSITIVE_INFINITY;
      lastPassMs = monotonicMs();
    },
    get intervalMs() {
      return intervalMs;
    },
  };
}
