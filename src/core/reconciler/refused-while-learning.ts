/**
 * Workloads the backend refused while their profile's breaker was still learning (fewer
 * refusals than its threshold). Issue 32: with a profile's placement switched off, the
 * first refusals failed their workloads (2 of 10 FAILED) before the breaker opened and held
 * the other 8. Such a workload now waits, PENDING with SUBMIT_REFUSED, not sent again, for
 * the profile's verdict (profile-breaker.ts):
 *
 *   1. the breaker opens: the profile is refused for all; it waits with the others and is
 *      submitted again when the profile is back;
 *   2. the profile accepts another submission, or a back-off passes with neither: the
 *      refusal was its own, and it fails with it;
 *   3. a restart lost the breaker's memory: it is a suspect again, from now.
 *
 * The failure in 2 is decided without the backend, so it is written only in a tick where
 * the backend answers a lookup of the refused attempt's token (Absent: no job came of it).
 * A first try failed such work in a tick the backend did not answer (INV I4 of the model
 * test), and a restart let it run past its refused attempt (maxAttempts).
 */
import type { Allocation, Workload } from "../models.ts";
import type { AllocationChange, Transition } from "../ports/reconciler-store.ts";
import { type TickEnv, write } from "./env.ts";
import type { BackendReads } from "./reads.ts";
import type { Live } from "./submissions.ts";

export interface RefusedSorted {
  /** Their verdict is "own": failed once the backend answers for their token. */
  readonly confirm: readonly Live[];
  /** Their profile is degraded: they wait with its other workloads (minted when allowed). */
  readonly release: readonly Workload[];
}

/** Steps 1 to 3 for this tick's refused workloads; their lookups go out with the tick's. */
export function sortRefused(env: TickEnv, refused: readonly Live[], now: number): RefusedSorted {
  const confirm: Live[] = [];
  const release: Workload[] = [];
  for (const live of refused) {
    const w = live.workload;
    const verdict = env.breakers.verdict(w.id, now);
    if (verdict.kind === "Own") confirm.push(live);
    else if (verdict.kind === "None") {
      if (!env.breakers.suspect(w.profile, w.id, refusalOf(w), now)) release.push(w);
    }
  }
  return { confirm, release };
}

/** Fails each confirmed refusal whose token the backend answered Absent for this tick. */
export function failConfirmed(env: TickEnv, confirm: readonly Live[], reads: BackendReads): void {
  const now = env.clock.now();
  const transitions: Transition[] = [];
  for (const { workload: w, allocation: a } of confirm) {
    const found = reads.found.get(a.token);
    if (found === undefined || found.kind === "Unavailable") continue;
    const verdict = env.breakers.verdict(w.id, now);
    if (verdict.kind !== "Own") continue;
    if (found.kind === "Found") {
      // A job under a token the backend refused: its own record says it was refused, and
      // that is what the workload ends with; the job is the backend's to explain.
      env.log.error("a refused submission's token names a job", {
        workloadId: w.id,
        allocationId: a.id,
      });
    }
    env.breakers.forget(w.id);
    transitions.push(failOwnRefusal(w, verdict.message));
  }
  write(env, transitions);
}

/** The refused attempt itself: FAILED with the backend's words, whatever its workload does. */
export function refusedAttempt(a: Allocation, message: string, now: number): AllocationChange {
  return {
    id: a.id,
    expectedPhase: a.phase,
    phase: "FAILED",
    reason: "SUBMIT_REJECTED",
    message,
    endedAt: now,
  };
}

/** A refusal while the breaker learned: the attempt FAILED, the workload waits. */
export function refusedWhileLearning(
  live: Live,
  message: string,
  now: number,
  /** The scheduler's own words where `message` hides names (core/scheduler-words.ts). */
  messageAdmin: string | null = null,
): Transition {
  const { workload: w, allocation: a } = live;
  const waiting = (said: string) =>
    `the backend refused this submission (${said}); it waits while profile ${w.profile} shows whether the refusal is the profile's or this workload's own`;
  return {
    allocation: refusedAttempt(a, message, now),
    workload: {
      id: w.id,
      expectedPhase: w.phase,
      expectedEpoch: w.executionEpoch,
      phase: "PENDING",
      reason: "SUBMIT_REFUSED",
      message: waiting(message),
      messageAdmin: messageAdmin === null ? null : waiting(messageAdmin),
    },
  };
}

/** The verdict on a refusal held while the breaker learned: its own, so the workload ends. */
function failOwnRefusal(w: Workload, message: string): Transition {
  return {
    workload: {
      id: w.id,
      expectedPhase: w.phase,
      expectedEpoch: w.executionEpoch,
      phase: "FAILED",
      reason: "SUBMIT_REJECTED",
      message,
      // The scheduler's words the waiting message kept for the admin (refusedWhileLearning):
      // without them the admin's show of the failed workload had only the hidden form.
      messageAdmin: w.messageAdmin == null ? null : refusalIn(w.messageAdmin),
    },
  };
}

const LEARNING_MESSAGE = /^the backend refused this submission \((.*)\); it waits while profile /s;

/** The backend's own words in a SUBMIT_REFUSED workload's message (refusedWhileLearning). */
function refusalOf(w: Workload): string {
  return w.message === null ? "refused by the backend" : refusalIn(w.message);
}

function refusalIn(message: string): string {
  return LEARNING_MESSAGE.exec(message)?.[1] ?? message;
}
