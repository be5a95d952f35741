/**
 * The barrier's step builders: an allocation fenced, its handle recorded while it stops,
 * and the workload ended CANCELLED with the reason it was asked to stop for (barrier.ts
 * runs them in order). Pure, compare-and-set, as decisions.ts.
 */
import { changedArrayView } from "../array/array-view.ts";
import type { Allocation, ExternalHandle, Reason, TerminalPhase, Workload } from "../models.ts";
import type { Transition } from "../ports/reconciler-store.ts";
import { endingOf, type Observed } from "./decisions.ts";

export interface StopIntent {
  readonly reason: Reason;
  readonly message: string;
}

/** Barrier stage 1: workload and allocation to STOPPING (gateways refuse this epoch's work). */
export function fence(w: Workload, a: Allocation, stop: StopIntent): Transition | null {
  if (w.phase === "STOPPING" && a.phase === "STOPPING") return null;
  const message = stop.message.length > 0 ? stop.message : "stopping";
  return {
    allocation: {
      id: a.id,
      expectedPhase: a.phase,
      phase: "STOPPING",
      reason: stop.reason,
      message,
    },
    workload: {
      id: w.id,
      expectedPhase: w.phase,
      expectedEpoch: w.executionEpoch,
      phase: "STOPPING",
      reason: stop.reason,
      message,
    },
  };
}

/** The handle of a stopping allocation whose submission was unresolved. */
export function recordStoppingHandle(
  a: Allocation,
  handle: ExternalHandle,
  now: number,
): Transition {
  return {
    allocation: {
      id: a.id,
      expectedPhase: a.phase,
      phase: a.phase,
      reason: a.reason,
      message: "found by its submission token while stopping",
      handle,
      submittedAt: now,
    },
  };
}

/** What "terminal" was observed for a stopping allocation. */
export type StopEnding =
  /** The backend reports the allocation ended (whatever ended it). */
  | {
      readonly kind: "Ended";
      readonly observation: Observed & { readonly phase: TerminalPhase };
      readonly handle?: ExternalHandle;
    }
  /** A definite answer that the submission never reached the backend. */
  | { readonly kind: "NeverSubmitted" };

/**
 * Barrier stage 6: the workload ends CANCELLED with the reason it was asked to stop for. The
 * allocation keeps the backend's truth about how it ended when the job ended on its own (a
 * batch job may have completed just before the cancel landed, and saying otherwise would
 * lose that fact), and only then does the workload carry the job's exit code. A cancellation
 * and a session's worker leaving cleanly because it was told to are the stop itself: the
 * allocation ends CANCELLED with the stop's reason, never COMPLETED with exit code 0.
 */
export function markStopped(
  w: Workload,
  a: Allocation,
  stop: StopIntent,
  ending: StopEnding,
  now: number,
): Transition {
  const wMessage = stop.message.length > 0 ? stop.message : "stopped";
  const workload = {
    id: w.id,
    expectedPhase: w.phase,
    expectedEpoch: w.executionEpoch,
    phase: "CANCELLED" as const,
    reason: stop.reason,
    message: wMessage,
  };
  switch (ending.kind) {
    case "Ended": {
      const e = endingOf(ending.observation);
      // A cancelled array keeps its last elements: which ones had finished before the stop.
      const arrayJson = changedArrayView(a.arrayViewJson, ending.observation.array);
      const byTheStop =
        e.phase === "CANCELLED" || (w.kind === "SESSION" && e.phase === "COMPLETED");
      return {
        allocation: {
          id: a.id,
          expectedPhase: a.phase,
          phase: byTheStop ? "CANCELLED" : e.phase,
          reason: byTheStop ? stop.reason : e.reason,
          message: byTheStop ? `${wMessage} (the backend reported ${e.phase})` : e.message,
          exitCode: byTheStop ? null : e.exitCode,
          endedAt: e.endedAt ?? now,
          ...(a.startedAt === null && e.startedAt !== null ? { startedAt: e.startedAt } : {}),
          ...(ending.handle !== undefined ? { handle: ending.handle, submittedAt: now } : {}),
          ...(arrayJson === undefined ? {} : { arrayViewJson: arrayJson }),
        },
        workload: { ...workload, exitCode: byTheStop ? null : e.exitCode },
      };
    }
    case "NeverSubmitted":
      return {
        allocation: {
          id: a.id,
          expectedPhase: a.phase,
          phase: "CANCELLED",
          reason: stop.reason,
          message: "stopped before it reached the backend",
          endedAt: now,
        },
        workload,
      };
    default: {
      const unreachable: never = ending;
      throw new Error(`unhandled stop ending ${JSON.stringify(unreachable)}`);
    }
  }
}

/** A workload asked to stop that holds nothing at the backend ends CANCELLED directly. */
export function stopWithoutAllocation(w: Workload, stop: StopIntent): Transition {
  return {
    workload: {
      id: w.id,
      expectedPhase: w.phase,
      expectedEpoch: w.executionEpoch,
      phase: "CANCELLED",
      reason: stop.reason,
      message: stop.message.length > 0 ? stop.message : "stopped",
    },
  };
}
