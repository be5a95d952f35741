/**
 * Pure step builders: given what the store says and what the backend answered, the one
 * compare-and-set transition to write (or null when nothing changed, so a steady tick writes
 * nothing). Every transition names the phase and epoch it expects, which is what makes a
 * step re-executable: re-run after a crash, it either applies once or finds the world moved.
 * The submit answer's steps are in submit-decisions.ts.
 */
import { changedArrayView } from "../array/array-view.ts";
import {
  type Allocation,
  type ExternalHandle,
  isTerminal,
  type Phase,
  RECOVERABLE_REASONS,
  type Reason,
  type TerminalPhase,
  type Workload,
} from "../models.ts";
import type { AllocationObservation, FindResult } from "../ports/allocation-backend.ts";
import type { Transition } from "../ports/reconciler-store.ts";

export type Observed = Extract<AllocationObservation, { readonly kind: "Observed" }>;

/**
 * A terminal phase always carries a reason. When the backend gives none, the phase implies
 * one; COMPLETED's is EXITED_ZERO (the process exited with status 0, which is all COMPLETED
 * may ever claim).
 */
const DEFAULT_TERMINAL_REASON: Readonly<Record<TerminalPhase, Reason>> = {
  COMPLETED: "EXITED_ZERO",
  FAILED: "NONZERO_EXIT",
  CANCELLED: "CANCELLED_BY_BACKEND",
  LOST: "NOT_FOUND_BY_BACKEND",
};

/** Phases a backend may report for an allocation it knows. */
export function isObservablePhase(phase: Phase): boolean {
  return phase !== "PENDING" && phase !== "SUBMITTING";
}

interface Ending {
  readonly phase: TerminalPhase;
  readonly reason: Reason;
  readonly message: string | null;
  readonly exitCode: number | null;
  readonly startedAt: number | null;
  readonly endedAt: number | null;
}

/**
 * How an attempt ended, from an observation or from the allocation's own record: both carry
 * the same fields, and a missing reason is the phase's default.
 */
export function endingOf(
  ended: Pick<
    Observed | Allocation,
    "reason" | "message" | "exitCode" | "startedAt" | "endedAt"
  > & {
    readonly phase: TerminalPhase;
  },
): Ending {
  return {
    phase: ended.phase,
    reason: ended.reason ?? DEFAULT_TERMINAL_REASON[ended.phase],
    message: ended.message,
    exitCode: ended.exitCode,
    startedAt: ended.startedAt,
    endedAt: ended.endedAt,
  };
}

export type AttemptOutcome =
  /** The workload goes back to PENDING (RETRYING); the next tick mints epoch + 1, new token. */
  | { readonly kind: "Retry"; readonly message: string }
  /** The workload takes the attempt's terminal phase and reason. */
  | { readonly kind: "End"; readonly ending: Ending };

/**
 * What an ended attempt means for a workload that still wants to run. Only the reasons that
 * say "the resources went away under it" (LOST, NODE_FAILURE, PREEMPTED) earn a new attempt,
 * and only while attempts are left: a job that failed on its own would fail again.
 */
function outcomeOfAttempt(w: Workload, ending: Ending): AttemptOutcome {
  if (RECOVERABLE_REASONS.has(ending.reason) && w.executionEpoch < w.maxAttempts) {
    return {
      kind: "Retry",
      message: `attempt ${w.executionEpoch} ended ${ending.reason}; attempt ${w.executionEpoch + 1} of ${w.maxAttempts} follows`,
    };
  }
  return { kind: "End", ending };
}

/** Both rows leave in one transaction, so the workload never disagrees with its attempt. */
function endAttempt(
  w: Workload,
  a: Allocation,
  ending: Ending,
  now: number,
  handle?: ExternalHandle,
): Transition {
  const outcome = outcomeOfAttempt(w, ending);
  // First seen already ended, yet it started: the RUNNING it went through is part of the story.
  const unseenStart =
    a.startedAt === null && ending.startedAt !== null && !isActiveRunning(a.phase)
      ? {
          passedThrough: {
            at: ending.startedAt,
            phase: "RUNNING" as const,
            reason: "STARTED" as const,
            message: "started (observed after it ended)",
          },
        }
      : {};
  return {
    ...unseenStart,
    allocation: {
      id: a.id,
      expectedPhase: a.phase,
      phase: ending.phase,
      reason: ending.reason,
      message: ending.message,
      exitCode: ending.exitCode,
      endedAt: ending.endedAt ?? now,
      ...(a.startedAt === null && ending.startedAt !== null ? { startedAt: ending.startedAt } : {}),
      ...(handle !== undefined ? { handle, submittedAt: now } : {}),
    },
    workload:
      outcome.kind === "Retry"
        ? {
            id: w.id,
            expectedPhase: w.phase,
            expectedEpoch: w.executionEpoch,
            phase: "PENDING",
            reason: "RETRYING",
            message: outcome.message,
          }
        : {
            id: w.id,
            expectedPhase: w.phase,
            expectedEpoch: w.executionEpoch,
            phase: ending.phase,
            reason: ending.reason,
            message: ending.message,
            exitCode: ending.exitCode,
          },
  };
}

/** Phases in which the allocation was already seen holding its resources. */
function isActiveRunning(phase: Phase): boolean {
  return phase === "RUNNING" || phase === "STOPPING";
}

/** An observed ending, with the array's last elements: which ones failed is what a user asks. */
function observedEnd(
  w: Workload,
  a: Allocation,
  obs: Observed & { readonly phase: TerminalPhase },
  now: number,
  handle?: ExternalHandle,
): Transition {
  const t = endAttempt(w, a, endingOf(obs), now, handle);
  const arrayJson = changedArrayView(a.arrayViewJson, obs.array);
  if (arrayJson === undefined || t.allocation === undefined) return t;
  return { ...t, allocation: { ...t.allocation, arrayViewJson: arrayJson } };
}

/** Mirror a live observation onto the allocation and its workload. */
function progress(
  w: Workload,
  a: Allocation,
  obs: Observed,
  now: number,
  handle?: ExternalHandle,
): Transition | null {
  // A new reason within the same phase (a queued job now HELD, or LIMIT_REACHED) is news
  // for the user; a missing reason is not a change.
  const sameReason = obs.reason === null || obs.reason === w.reason;
  // An array's elements moved (one more completed, one failed): the view and the message
  // (its counts) are news even while the array's own phase stays RUNNING.
  const arrayJson = changedArrayView(a.arrayViewJson, obs.array);
  // The backend's end time: undefined when it does not say (keep what is stored).
  const deadline =
    obs.deadlineAt === undefined || obs.deadlineAt === a.deadlineAt
      ? {}
      : { deadlineAt: obs.deadlineAt };
  if (
    handle === undefined &&
    obs.phase === a.phase &&
    obs.phase === w.phase &&
    sameReason &&
    arrayJson === undefined
  ) {
    if (deadline.deadlineAt === undefined) return null;
    // Only the end time moved (first seen running, or the limit was changed): no event.
    return {
      allocation: {
        id: a.id,
        expectedPhase: a.phase,
        phase: a.phase,
        reason: a.reason,
        message: a.message,
        ...deadline,
      },
    };
  }
  const startedAt =
    obs.phase === "RUNNING" && a.startedAt === null ? { startedAt: obs.startedAt ?? now } : {};
  return {
    allocation: {
      id: a.id,
      expectedPhase: a.phase,
      phase: obs.phase,
      reason: obs.reason,
      message: obs.message,
      ...startedAt,
      ...deadline,
      ...(arrayJson === undefined ? {} : { arrayViewJson: arrayJson }),
      ...(handle !== undefined ? { handle, submittedAt: now } : {}),
    },
    workload: {
      id: w.id,
      expectedPhase: w.phase,
      expectedEpoch: w.executionEpoch,
      phase: obs.phase,
      reason: obs.reason,
      message: obs.message,
    },
  };
}

/** A watched allocation's observation. Null: nothing changed (the steady state). */
export function followObservation(
  w: Workload,
  a: Allocation,
  obs: Observed,
  now: number,
): Transition | null {
  const phase = obs.phase;
  if (isTerminal(phase)) return observedEnd(w, a, { ...obs, phase }, now);
  return progress(w, a, obs, now);
}

/**
 * The token lookup found the submission whose answer we never recorded: record its handle
 * and whatever the lookup saw. An Indeterminate sighting still proves the job exists, so the
 * allocation is at least QUEUED; the next observation says more.
 */
export function recordFound(
  w: Workload,
  a: Allocation,
  found: Extract<FindResult, { readonly kind: "Found" }>,
  now: number,
): Transition | null {
  const obs = found.observation;
  if (obs.kind === "Observed" && isObservablePhase(obs.phase)) {
    const phase = obs.phase;
    if (isTerminal(phase)) return observedEnd(w, a, { ...obs, phase }, now, found.handle);
    return progress(w, a, obs, now, found.handle);
  }
  const queued: Observed = {
    kind: "Observed",
    phase: "QUEUED",
    reason: "SUBMITTED",
    message: "found by its submission token",
    exitCode: null,
    startedAt: null,
    endedAt: null,
  };
  return progress(w, a, queued, now, found.handle);
}

/**
 * An allocation that ended while its workload still shows a live phase. Only a store written
 * by something other than this reconciler gets here (every ending is written together with
 * its workload), but a level-triggered loop settles it instead of wedging on it.
 */
export function settleEnded(w: Workload, a: Allocation & { readonly phase: TerminalPhase }) {
  // Refused while its profile was degraded (submissions.ts): not this workload's ending. It
  // waits PENDING for the profile, and its next attempt is minted when the breaker allows.
  // (One refused while the breaker learned, SUBMIT_REFUSED, never gets here: classify hands
  // it to refused-while-learning.ts, which waits for its verdict.)
  if (w.phase === "PENDING" && w.reason === "PROFILE_DEGRADED") return null;
  const outcome = outcomeOfAttempt(w, endingOf(a));
  if (outcome.kind === "Retry") {
    if (w.phase === "PENDING") return null;
    return {
      workload: {
        id: w.id,
        expectedPhase: w.phase,
        expectedEpoch: w.executionEpoch,
        phase: "PENDING",
        reason: "RETRYING",
        message: outcome.message,
      },
    } satisfies Transition;
  }
  const e = outcome.ending;
  return {
    workload: {
      id: w.id,
      expectedPhase: w.phase,
      expectedEpoch: w.executionEpoch,
      phase: e.phase,
      reason: e.reason,
      message: e.message,
      exitCode: e.exitCode,
    },
  } satisfies Transition;
}
