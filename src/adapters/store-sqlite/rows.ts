import { DEPENDENCY_KINDS, type Dependency } from "../../core/dependencies.ts";
import {
  type Allocation,
  type Condition,
  type ConditionStatus,
  type ConditionType,
  type DesiredState,
  externalHandle,
  isPhase,
  isReason,
  type Phase,
  type Reason,
  submissionToken,
  type TransitionEvent,
  type Workload,
  type WorkloadKind,
  type WorkloadSpec,
} from "../../core/models.ts";
import type { allocations, conditions, events, workloads } from "./schema.ts";

type WorkloadRow = typeof workloads.$inferSelect;
type AllocationRow = typeof allocations.$inferSelect;
type EventRow = typeof events.$inferSelect;
type ConditionRow = typeof conditions.$inferSelect;

// A row that does not parse is a corrupted store or a schema bug: throw, do not guess.
export function parsePhase(value: string): Phase {
  if (!isPhase(value)) throw new Error(`store holds unknown phase ${JSON.stringify(value)}`);
  return value;
}

export function parseReason(value: string | null): Reason | null {
  if (value === null) return null;
  if (!isReason(value)) throw new Error(`store holds unknown reason ${JSON.stringify(value)}`);
  return value;
}

export function parseWorkloadKind(value: string): WorkloadKind {
  if (value !== "SESSION" && value !== "BATCH") {
    throw new Error(`store holds unknown workload kind ${JSON.stringify(value)}`);
  }
  return value;
}

// Shared and frozen: nearly every live workload wants to run, and a per-row copy of this is
// 10,000 allocations per reconciler tick for nothing.
const RUN: DesiredState = Object.freeze({ kind: "RUN" });

const dependencyKinds: ReadonlySet<string> = new Set(DEPENDENCY_KINDS);

/** `after_json` as stored; a malformed one is a corrupted store, not "no dependencies". */
export function parseAfter(json: string | null): readonly Dependency[] | null {
  if (json === null) return null;
  const value: unknown = JSON.parse(json);
  if (
    !Array.isArray(value) ||
    !value.every(
      (d) =>
        typeof d === "object" &&
        d !== null &&
        dependencyKinds.has(d.kind) &&
        typeof d.workloadId === "string",
    )
  ) {
    throw new Error(`store holds a malformed after_json ${JSON.stringify(json)}`);
  }
  return value as Dependency[];
}

/** The optional fields of a workload row: absent when unset, so old rows read as before. */
export function heldAndAfter(
  held: number,
  afterJson: string | null,
): { held?: true; after?: readonly Dependency[] } {
  const after = parseAfter(afterJson);
  return { ...(held === 1 ? { held: true } : {}), ...(after === null ? {} : { after }) };
}

export function parseDesired(
  desired: string,
  stopReason: string | null,
  stopMessage: string | null,
): DesiredState {
  if (desired === "RUN") return RUN;
  return {
    kind: "STOP",
    reason: parseReason(stopReason) ?? "USER_CANCELLED",
    message: stopMessage ?? "",
  };
}

export function toWorkload(row: WorkloadRow): Workload {
  return {
    id: row.id,
    kind: parseWorkloadKind(row.kind),
    name: row.name,
    profile: row.profile,
    spec: JSON.parse(row.specJson) as WorkloadSpec,
    specRevision: row.specRevision,
    phase: parsePhase(row.phase),
    reason: parseReason(row.reason),
    message: row.message,
    ...(row.messageAdmin == null ? {} : { messageAdmin: row.messageAdmin }),
    desired: parseDesired(row.desired, row.stopReason, row.stopMessage),
    executionEpoch: row.executionEpoch,
    maxAttempts: row.maxAttempts,
    exitCode: row.exitCode,
    idempotencyKey: row.idempotencyKey,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    lastActiveAt: row.lastActiveAt,
    owner: row.owner,
    ...heldAndAfter(row.held, row.afterJson),
  };
}

export function toAllocation(row: AllocationRow): Allocation {
  return {
    id: row.id,
    workloadId: row.workloadId,
    epoch: row.epoch,
    token: submissionToken(row.token),
    handle: row.handle === null ? null : externalHandle(row.handle),
    phase: parsePhase(row.phase),
    reason: parseReason(row.reason),
    message: row.message,
    exitCode: row.exitCode,
    submittedAt: row.submittedAt,
    startedAt: row.startedAt,
    endedAt: row.endedAt,
    acknowledgedAt: row.acknowledgedAt,
    deadlineAt: row.deadlineAt,
    deadlineWarnedAt: row.deadlineWarnedAt,
    ...(row.arraySize === null ? {} : { arraySize: row.arraySize }),
    ...(row.arrayViewJson === null ? {} : { arrayViewJson: row.arrayViewJson }),
  };
}

export function toEvent(row: EventRow): TransitionEvent {
  return {
    workloadId: row.workloadId,
    allocationId: row.allocationId,
    at: row.at,
    phase: parsePhase(row.phase),
    reason: parseReason(row.reason),
    message: row.message,
    ...(row.messageAdmin == null ? {} : { messageAdmin: row.messageAdmin }),
  };
}

export function toCondition(row: ConditionRow): Condition {
  return {
    type: row.type as ConditionType,
    status: row.status as ConditionStatus,
    reason: row.reason,
    message: row.message,
    lastTransitionTime: row.lastTransitionTime,
  };
}
