/**
 * Every job state squeue and sacct can print, and what it means in orchestration terms.
 *
 * squeue and sacct report ONE word per job: the base state, unless a recognised state flag is
 * set, in which case the flag is printed instead (so "COMPLETING" hides "COMPLETED" or
 * "CANCELLED" underneath). Both the base states and the flags are therefore listed. The list
 * is the union of `man squeue`/`man sacct` JOB STATE CODES (Slurm 22.05) and the job state
 * flags of the Slurm job-state-codes page (EXPEDITING, LAUNCH_FAILED, POWER_UP_NODE,
 * RECONFIG_FAIL, UPDATE_DB), so a newer scheduler's words are recognised too.
 *
 * Decisions that are not obvious:
 * - TIMEOUT is FAILED/TIME_LIMIT_EXCEEDED: the work did not finish.
 * - NODE_FAIL and PREEMPTED are FAILED with a recoverable reason (NODE_FAILURE, PREEMPTED):
 *   the attempt is over, and whether a new attempt starts is the reconciler's decision from
 *   RECOVERABLE_REASONS. Jobs are submitted with --no-requeue, so the scheduler does not
 *   silently restart an attempt under the same epoch behind our back.
 * - SUSPENDED and STOPPED are RUNNING with reason SUSPENDED: the job still holds its
 *   allocation (nodes, memory; STOPPED even its CPUs), so calling it QUEUED would tell the
 *   reclaimer and the gang-readiness check that nothing is held.
 * - REQUEUED, REQUEUE_HOLD, REQUEUE_FED, SPECIAL_EXIT, EXPEDITING and LAUNCH_FAILED are QUEUED
 *   with reason REQUEUED: the job is waiting to start (again).
 * - UPDATE_DB and RECONFIG_FAIL are flags that hide the base state without telling anything
 *   about it: Indeterminate, and the next observation sees the base state.
 * - REVOKED means a federation sibling started on ANOTHER cluster, which this backend does
 *   not observe: Indeterminate rather than a guess in either direction.
 * - CANCELLED is ADMIN_CANCELLED: this daemon cancels only through its stop barrier, which
 *   records its own reason (USER_CANCELLED, IDLE_TIMEOUT, ...) over the backend's. A
 *   cancellation observed any other way was someone else's (an administrator's scancel).
 * - Anything not in this table is Indeterminate and logged by the caller. Never COMPLETED:
 *   claiming success for work we cannot account for is the answer that silently loses science.
 *
 * PENDING_REASON_RULES map the scheduler's pending reason (squeue %r) to what the user can do
 * about it; the raw word stays in the message (rewritten by public-messages.ts, so no
 * partition or QoS name reaches the API).
 */
import type { Phase, Reason } from "../../core/models.ts";

export interface ExitStatus {
  /** The exit code of the batch script (or of the step the scheduler reports). */
  readonly code: number;
  /** The signal that ended it, 0 when none. */
  readonly signal: number;
}

type Entry =
  | { readonly kind: "Phase"; readonly phase: Phase; readonly reason: Reason | null }
  | { readonly kind: "Indeterminate"; readonly why: string };

const phase = (p: Phase, reason: Reason | null = null): Entry => ({
  kind: "Phase",
  phase: p,
  reason,
});
const indeterminate = (why: string): Entry => ({ kind: "Indeterminate", why });

/** Exported for the coverage test: every state the man pages list must be a key here. */
export const JOB_STATE_TABLE: Readonly<Record<string, Entry>> = Object.freeze({
  // Waiting for resources.
  PENDING: phase("QUEUED"),
  CONFIGURING: phase("QUEUED"),
  POWER_UP_NODE: phase("QUEUED"),
  RESV_DEL_HOLD: phase("QUEUED"),
  REQUEUED: phase("QUEUED", "REQUEUED"),
  REQUEUE_HOLD: phase("QUEUED", "REQUEUED"),
  REQUEUE_FED: phase("QUEUED", "REQUEUED"),
  SPECIAL_EXIT: phase("QUEUED", "REQUEUED"),
  EXPEDITING: phase("QUEUED", "REQUEUED"),
  LAUNCH_FAILED: phase("QUEUED", "REQUEUED"),
  // Holding an allocation.
  RUNNING: phase("RUNNING"),
  COMPLETING: phase("RUNNING"),
  SIGNALING: phase("RUNNING"),
  STAGE_OUT: phase("RUNNING"),
  RESIZING: phase("RUNNING"),
  SUSPENDED: phase("RUNNING", "SUSPENDED"),
  STOPPED: phase("RUNNING", "SUSPENDED"),
  // Ended.
  COMPLETED: phase("COMPLETED", "EXITED_ZERO"),
  FAILED: phase("FAILED", "NONZERO_EXIT"),
  TIMEOUT: phase("FAILED", "TIME_LIMIT_EXCEEDED"),
  OUT_OF_MEMORY: phase("FAILED", "OUT_OF_MEMORY"),
  NODE_FAIL: phase("FAILED", "NODE_FAILURE"),
  PREEMPTED: phase("FAILED", "PREEMPTED"),
  BOOT_FAIL: phase("FAILED", "BOOT_FAILURE"),
  DEADLINE: phase("FAILED", "DEADLINE_EXCEEDED"),
  CANCELLED: phase("CANCELLED", "ADMIN_CANCELLED"),
  // Flags that say nothing about the state underneath, or about another cluster.
  UPDATE_DB: indeterminate("the scheduler is updating the job's accounting record"),
  RECONFIG_FAIL: indeterminate("node reconfiguration for the job failed; state pending"),
  REVOKED: indeterminate("a federation sibling started on another cluster, not observed here"),
});

type WaitReason = Extract<
  Reason,
  "WAITING_FOR_RESOURCES" | "HELD" | "LIMIT_REACHED" | "NODES_UNAVAILABLE" | "CANNOT_START"
>;

/**
 * Pending reasons (`man squeue`, JOB REASON CODES, 22.05), first match wins. Each class is a
 * different thing to do: wait (WAITING_FOR_RESOURCES), ask an administrator to release the
 * job (HELD), wait for or stop one's own other work (LIMIT_REACHED), wait for the cluster to
 * be repaired (NODES_UNAVAILABLE), or change the request because it can never start
 * (CANNOT_START).
 */
const PENDING_REASON_RULES: readonly (readonly [RegExp, WaitReason])[] = [
  [/^(JobHeld(Admin|User)|JobHoldMaxRequeue|held)\b/i, "HELD"],
  [
    /^(Partition(Config|NodeLimit|TimeLimit)|BadConstraints|Invalid(Account|QOS)|DependencyNeverSatisfied|AccountNotAllowed|QOSNotAllowed|Nodes?RequiredNotAvail|InactiveLimit)\b/i,
    "CANNOT_START",
  ],
  [
    // squeue --Format=Reason prints ReqNodeNotAvail's long form, measured on 22.05:
    // "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority ...".
    /^(ReqNodeNotAvail|NodeDown|Partition(Down|Inactive)|FrontEndDown|SystemFailure|NodesUnavailable|Nodes required for job are DOWN)\b/i,
    "NODES_UNAVAILABLE",
  ],
  [/^(QOS|Assoc|MaxCpuPerAccount|JobArrayTaskLimit)|Limit$/i, "LIMIT_REACHED"],
];

/** The user-facing reason a pending job waits for; unknown words still mean "it waits". */
export function mapPendingReason(raw: string): WaitReason {
  const word = raw.trim().replace(/^\(|\)$/g, "");
  for (const [pattern, reason] of PENDING_REASON_RULES) if (pattern.test(word)) return reason;
  return "WAITING_FOR_RESOURCES";
}

export type StateMapping =
  | {
      readonly kind: "Mapped";
      readonly phase: Phase;
      readonly reason: Reason | null;
      readonly exitCode: number | null;
      readonly message: string | null;
    }
  | { readonly kind: "Indeterminate"; readonly message: string; readonly unrecognised: boolean };

/**
 * The state word as printed. sacct writes "CANCELLED by 1000" (the uid that cancelled), and
 * older tools append "+" when a state was cut; both are reduced to the bare word.
 */
export function normaliseState(raw: string): string {
  const first = raw.trim().split(/\s+/, 1)[0] ?? "";
  return first.replace(/\+$/, "").toUpperCase();
}

/**
 * The exit code the orchestration layer records: the script's code when it has one, else
 * 128 + signal (the shell convention) when a signal ended it, else null ("no exit status").
 */
function exitCodeOf(status: ExitStatus | null): number | null {
  if (status === null) return null;
  if (status.code > 0) return status.code;
  if (status.signal > 0) return 128 + status.signal;
  return status.code === 0 ? 0 : null;
}

export function mapJobState(rawState: string, exit: ExitStatus | null): StateMapping {
  const state = normaliseState(rawState);
  const entry = Object.hasOwn(JOB_STATE_TABLE, state) ? JOB_STATE_TABLE[state] : undefined;
  if (entry === undefined) {
    return {
      kind: "Indeterminate",
      message: `unrecognised job state ${JSON.stringify(rawState.slice(0, 64))}`,
      unrecognised: true,
    };
  }
  switch (entry.kind) {
    case "Indeterminate":
      return { kind: "Indeterminate", message: `${state}: ${entry.why}`, unrecognised: false };
    case "Phase":
      return mapped(state, rawState, entry.phase, entry.reason, exit);
    default: {
      const never: never = entry;
      throw new Error(`unhandled table entry ${JSON.stringify(never)}`);
    }
  }
}

function mapped(
  state: string,
  rawState: string,
  p: Phase,
  reason: Reason | null,
  exit: ExitStatus | null,
): StateMapping {
  switch (p) {
    case "COMPLETED":
      // COMPLETED means exit code zero on every node; that is the scheduler's claim to make.
      return { kind: "Mapped", phase: p, reason, exitCode: 0, message: null };
    case "FAILED": {
      // A failure "with exit code 0" (e.g. a launch failure reported as 0:0) has no exit
      // status worth recording; 0 would read as success to anyone skimming the record.
      const code = exitCodeOf(exit);
      const exitCode = code === 0 ? null : code;
      let message = state;
      if (exit !== null && exit.signal > 0) message = `${state}: ended by signal ${exit.signal}`;
      else if (exit !== null && exit.code > 0) message = `${state}: exit code ${exit.code}`;
      return { kind: "Mapped", phase: p, reason, exitCode, message };
    }
    case "CANCELLED":
      // sacct names who cancelled ("CANCELLED by 0"); keep it for the operator.
      return { kind: "Mapped", phase: p, reason, exitCode: null, message: rawState.trim() };
    default:
      return { kind: "Mapped", phase: p, reason, exitCode: null, message: null };
  }
}
