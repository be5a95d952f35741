/**
 * The step builders for an attempt that was just submitted or refused before it could be:
 * the transition that records the backend's answer (or the preparer's refusal) on the
 * allocation and its workload together, compare-and-set like every step (decisions.ts).
 */
import type { Allocation, Reason, Workload } from "../models.ts";
import type { SubmitResult } from "../ports/allocation-backend.ts";
import type { Transition } from "../ports/reconciler-store.ts";

/** The submit answer for one freshly minted or re-submitted attempt. */
export function recordSubmitResult(
  w: Workload,
  a: Allocation,
  result: SubmitResult,
  now: number,
  /** Whether the backend launched it in its verified sandbox (asked before submitting). */
  sandboxed = false,
): Transition {
  const expectW = { id: w.id, expectedPhase: w.phase, expectedEpoch: w.executionEpoch };
  switch (result.kind) {
    case "Created":
    case "Existing": {
      const message =
        result.kind === "Created"
          ? `attempt ${a.epoch} submitted`
          : `attempt ${a.epoch} was already submitted`;
      return {
        allocation: {
          id: a.id,
          expectedPhase: a.phase,
          phase: "QUEUED",
          reason: "SUBMITTED",
          message,
          handle: result.handle,
          submittedAt: now,
          // Existing: submitted by an earlier call whose answer was lost, perhaps by a
          // daemon configured otherwise; unknown, so recorded as not sandboxed.
          launchSandboxed: result.kind === "Created" && sandboxed,
        },
        workload: { ...expectW, phase: "QUEUED", reason: "SUBMITTED", message },
      };
    }
    case "Rejected": {
      const reason = result.reason ?? "SUBMIT_REJECTED";
      return {
        allocation: {
          id: a.id,
          expectedPhase: a.phase,
          phase: "FAILED",
          reason,
          message: result.message,
          endedAt: now,
        },
        workload: {
          ...expectW,
          phase: "FAILED",
          reason,
          message: result.message,
          messageAdmin: result.messageAdmin ?? null,
        },
      };
    }
    case "Unknown":
      // The phase stays SUBMITTING: that, with no handle, is what sends the next tick to
      // findByToken first. The reason is only for operators reading the events.
      return {
        allocation: {
          id: a.id,
          expectedPhase: a.phase,
          phase: "SUBMITTING",
          reason: "SUBMIT_UNKNOWN",
          message: result.message,
        },
        workload: {
          ...expectW,
          phase: "SUBMITTING",
          reason: "SUBMIT_UNKNOWN",
          message: result.message,
        },
      };
    default: {
      const unreachable: never = result;
      throw new Error(`unhandled submit result ${JSON.stringify(unreachable)}`);
    }
  }
}

/** The preparer refused the attempt: it ends FAILED without ever being submitted. */
export function refuseAttempt(
  w: Workload,
  a: Allocation,
  reason: Reason,
  message: string,
  now: number,
): Transition {
  return {
    allocation: {
      id: a.id,
      expectedPhase: a.phase,
      phase: "FAILED",
      reason,
      message,
      endedAt: now,
    },
    workload: {
      id: w.id,
      expectedPhase: w.phase,
      expectedEpoch: w.executionEpoch,
      phase: "FAILED",
      reason,
      message,
    },
  };
}
