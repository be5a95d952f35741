/**
 * The JSON shapes of INTERFACE.md, built from store rows. Times leave the daemon as ISO-8601
 * UTC strings; inside they stay epoch milliseconds. Fields are picked one by one, never
 * spread from a row: a column added to the store (a submission token, a backend handle)
 * must not appear in a response by accident.
 */

import {
  type Allocation,
  CONDITION_TYPES,
  type Condition,
  type ConditionStatus,
  type ConditionType,
  type Phase,
  type TransitionEvent,
  type Workload,
  type WorkloadKind,
} from "../../core/models.ts";
import { hintFor, type RanOutOfTime } from "../../core/reason-hints.ts";
import { type ArrayAllocationView, arrayAllocationView, arrayCap } from "./array-view.ts";

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function isoOrNull(ms: number | null): string | null {
  return ms === null ? null : iso(ms);
}

export interface ConditionView {
  /** SCHEDULED is derived from the workload for every kind; the rest are a session's. */
  readonly type: ConditionType | "SCHEDULED";
  readonly status: ConditionStatus;
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: string;
}

export interface AllocationView {
  readonly id: string;
  readonly epoch: number;
  readonly phase: Phase;
  readonly reason: string | null;
  readonly submittedAt: string | null;
  readonly startedAt: string | null;
  readonly endedAt: string | null;
  /** When the backend ends this attempt for its time limit; null: not known or none. */
  readonly deadline: string | null;
  /**
   * The backend's own id for this attempt (a scheduler's job id), to match it in the
   * backend's tools and in `GET /v1/workloads?backendJobId=`; null before it was handed over.
   */
  readonly backendJobId: string | null;
  /** A job array's elements as last observed; null for one job (or before the first look). */
  readonly array: ArrayAllocationView | null;
}

export interface WorkloadView {
  readonly id: string;
  readonly kind: WorkloadKind;
  readonly name: string;
  readonly profile: string;
  /** A SESSION's environment on its profile; null: the node's python3. */
  readonly environment: string | null;
  /** What it asked for in place of its profile's defaults; null: that default. */
  readonly resources: {
    readonly cpus: number | null;
    readonly memoryMb: number | null;
    readonly gpus: number | null;
  };
  /** The principal that submitted it; null: the admin. */
  readonly owner: string | null;
  /** Created held and not released yet. */
  readonly held: boolean;
  /** The workloads it runs after. */
  readonly after: readonly { readonly kind: string; readonly workloadId: string }[];
  readonly phase: Phase;
  readonly reason: string | null;
  readonly message: string | null;
  /** What the reason asks a person to do (reason-hints.ts); null when it asks nothing. */
  readonly hint: string | null;
  readonly specRevision: number;
  readonly executionEpoch: number;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly lastActiveAt: string | null;
  readonly exitCode: number | null;
  readonly conditions: readonly ConditionView[];
  readonly allocations: readonly AllocationView[];
  /** The current attempt's deadline while it runs (TIME_REMAINING); null otherwise. */
  readonly deadline: string | null;
  /**
   * When `phase` was last confirmed: for a phase the backend holds (SUBMITTING, QUEUED,
   * RUNNING, STOPPING), the last time the backend answered for the current attempt, null
   * when it has not since the daemon started; for PENDING and ended phases, which the
   * daemon itself decides, when the phase was written. Not cached (view-cache.ts adds it).
   */
  readonly phaseConfirmedAt: string | null;
  /**
   * Seconds left before that deadline at the time of the answer, never negative. Last, and
   * the only field that depends on the clock: the view cache holds the rest and adds it.
   */
  readonly timeRemainingSeconds: number | null;
}

/** Everything of a workload's view but the fields that change without a store write. */
export type StableWorkloadView = Omit<WorkloadView, "timeRemainingSeconds" | "phaseConfirmedAt">;

/** When the backend last confirmed an allocation's phase (epoch ms), or null. */
export type PhaseConfirmedAt = (allocationId: string) => number | null;

export const NEVER_CONFIRMED: PhaseConfirmedAt = () => null;

/** Phases whose truth is the backend's: only its answer confirms them. */
const BACKEND_HELD_PHASES: ReadonlySet<Phase> = new Set<Phase>([
  "SUBMITTING",
  "QUEUED",
  "RUNNING",
  "STOPPING",
]);

/**
 * What `phaseConfirmedAt` is read from: the current attempt whose confirmation counts, or
 * the time the daemon wrote a phase it decides itself.
 */
export type ConfirmationSource =
  | { readonly kind: "Backend"; readonly allocationId: string | null }
  | { readonly kind: "Written"; readonly atMs: number };

export function confirmationSource(
  workload: Workload,
  allocations: readonly Allocation[],
): ConfirmationSource {
  if (!BACKEND_HELD_PHASES.has(workload.phase))
    return { kind: "Written", atMs: workload.updatedAt };
  const current = allocations.find((a) => a.epoch === workload.executionEpoch);
  return { kind: "Backend", allocationId: current?.id ?? null };
}

export function phaseConfirmedAtMs(
  source: ConfirmationSource,
  confirmed: PhaseConfirmedAt,
): number | null {
  if (source.kind === "Written") return source.atMs;
  return source.allocationId === null ? null : confirmed(source.allocationId);
}

/**
 * A SESSION always shows all five conditions, in the documented order: one the sessions
 * engine has not written yet is UNKNOWN rather than absent, so a client never has to tell
 * "missing from the list" from "not known yet".
 */
function conditionViews(
  workload: Workload,
  stored: readonly Condition[],
  allocations: readonly Allocation[],
): ConditionView[] {
  const scheduled = scheduledCondition(workload, allocations);
  if (workload.kind === "BATCH") return [scheduled];
  const session = CONDITION_TYPES.map((type): ConditionView => {
    const found = stored.find((c) => c.type === type);
    if (found) {
      return {
        type,
        status: found.status,
        reason: found.reason,
        message: found.message,
        lastTransitionTime: iso(found.lastTransitionTime),
      };
    }
    return {
      type,
      status: "UNKNOWN",
      reason: "NOT_OBSERVED",
      message: "not observed yet",
      lastTransitionTime: iso(workload.createdAt),
    };
  });
  return [scheduled, ...session];
}

const WAITING_PHASES: ReadonlySet<Phase> = new Set<Phase>(["PENDING", "SUBMITTING", "QUEUED"]);

/**
 * Whether the current attempt got its resources, and if not, why it waits: the workload's
 * own reason (WAITING_FOR_RESOURCES, HELD, LIMIT_REACHED, ...), so "why is my job not
 * running" has its answer where a client looks for readiness.
 */
function scheduledCondition(workload: Workload, allocations: readonly Allocation[]): ConditionView {
  const current = allocations.find((a) => a.epoch === workload.executionEpoch);
  const startedAt = current?.startedAt ?? null;
  if (!WAITING_PHASES.has(workload.phase) && startedAt !== null) {
    return {
      type: "SCHEDULED",
      status: "TRUE",
      reason: "STARTED",
      message: "the allocation started",
      lastTransitionTime: iso(startedAt),
    };
  }
  return {
    type: "SCHEDULED",
    status: "FALSE",
    reason: workload.reason ?? "NOT_SCHEDULED",
    message: workload.message ?? "not scheduled yet",
    lastTransitionTime: iso(workload.updatedAt),
  };
}

function allocationView(a: Allocation, maxConcurrent: number | null): AllocationView {
  return {
    id: a.id,
    epoch: a.epoch,
    phase: a.phase,
    reason: a.reason,
    submittedAt: isoOrNull(a.submittedAt),
    startedAt: isoOrNull(a.startedAt),
    endedAt: isoOrNull(a.endedAt),
    deadline: isoOrNull(a.deadlineAt),
    backendJobId: a.handle,
    array: arrayAllocationView(a, maxConcurrent),
  };
}

const HOLDING_PHASES: ReadonlySet<Phase> = new Set<Phase>(["RUNNING", "STOPPING"]);

/**
 * TIME_REMAINING rests on the end time the backend reported for the current attempt, and
 * only while the workload holds it: a queued attempt's end is a guess, an ended one's moot.
 */
export function workloadDeadlineMs(
  workload: Workload,
  allocations: readonly Allocation[],
): number | null {
  if (!HOLDING_PHASES.has(workload.phase)) return null;
  const current = allocations.find((a) => a.epoch === workload.executionEpoch);
  return current?.deadlineAt ?? null;
}

/** The current attempt's run time and limit, when it started, ended and had a deadline. */
function ranOutOfTime(workload: Workload, allocations: readonly Allocation[]): RanOutOfTime | null {
  const a = allocations.find((x) => x.epoch === workload.executionEpoch);
  if (a === undefined || a.startedAt === null || a.endedAt === null || a.deadlineAt === null) {
    return null;
  }
  return {
    ranSeconds: (a.endedAt - a.startedAt) / 1000,
    limitSeconds: (a.deadlineAt - a.startedAt) / 1000,
  };
}

/** Whole seconds from `nowMs` to the deadline, never negative; null without a deadline. */
export function timeRemainingSeconds(deadlineMs: number | null, nowMs: number): number | null {
  return deadlineMs === null ? null : Math.max(0, Math.floor((deadlineMs - nowMs) / 1000));
}

export function workloadView(
  workload: Workload,
  conditions: readonly Condition[],
  allocations: readonly Allocation[],
  nowMs: number,
  confirmed: PhaseConfirmedAt = NEVER_CONFIRMED,
): WorkloadView {
  const stable = stableWorkloadView(workload, conditions, allocations);
  const deadlineMs = workloadDeadlineMs(workload, allocations);
  const confirmedMs = phaseConfirmedAtMs(confirmationSource(workload, allocations), confirmed);
  return {
    ...stable,
    phaseConfirmedAt: isoOrNull(confirmedMs),
    timeRemainingSeconds: timeRemainingSeconds(deadlineMs, nowMs),
  };
}

export function stableWorkloadView(
  workload: Workload,
  conditions: readonly Condition[],
  allocations: readonly Allocation[],
): StableWorkloadView {
  return {
    id: workload.id,
    kind: workload.kind,
    name: workload.name,
    profile: workload.profile,
    environment: workload.spec.environment ?? null,
    resources: {
      cpus: workload.spec.resources?.cpus ?? null,
      memoryMb: workload.spec.resources?.memoryMb ?? null,
      gpus: workload.spec.resources?.gpus ?? null,
    },
    owner: workload.owner ?? null,
    held: workload.held === true,
    after: workload.after ?? [],
    phase: workload.phase,
    reason: workload.reason,
    message: workload.message,
    hint: hintFor(workload.reason, workload.message, ranOutOfTime(workload, allocations)),
    specRevision: workload.specRevision,
    executionEpoch: workload.executionEpoch,
    createdAt: iso(workload.createdAt),
    updatedAt: iso(workload.updatedAt),
    lastActiveAt: isoOrNull(workload.lastActiveAt),
    exitCode: workload.exitCode,
    conditions: conditionViews(workload, conditions, allocations),
    allocations: allocations.map((a) => allocationView(a, arrayCap(workload, a))),
    deadline: isoOrNull(workloadDeadlineMs(workload, allocations)),
  };
}

export interface EventView {
  readonly at: string;
  readonly phase: Phase;
  readonly reason: string | null;
  readonly message: string | null;
}

export function eventView(e: TransitionEvent): EventView {
  return { at: iso(e.at), phase: e.phase, reason: e.reason, message: e.message };
}
