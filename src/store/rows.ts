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
} from "../orchestration/models.ts";
import type { allocations, conditions, events, workloads } from "./schema.ts";

type WorkloadRow = typeof workloads.$inferSelect;
type AllocationRow = typeof allocations.$inferSelect;
type EventRow = typeof events.$inferSelect;
type ConditionRow = typeof conditions.$inferSelect;

// A row that does not parse is a corrupted store or a schema bug: throw, do not guess.
function phase(value: string): Phase {
  if (!isPhase(value)) throw new Error(`store holds unknown phase ${JSON.stringify(value)}`);
  return value;
}

function reason(value: string | null): Reason | null {
  if (value === null) return null;
  if (!isReason(value)) throw new Error(`store holds unknown reason ${JSON.stringify(value)}`);
  return value;
}

function kind(value: string): WorkloadKind {
  if (value !== "SESSION" && value !== "BATCH") {
    throw new Error(`store holds unknown workload kind ${JSON.stringify(value)}`);
  }
  return value;
}

function desired(row: WorkloadRow): DesiredState {
  if (row.desired === "RUN") return { kind: "RUN" };
  return {
    kind: "STOP",
    reason: reason(row.stopReason) ?? "USER_CANCELLED",
    message: row.stopMessage ?? "",
  };
}

export function toWorkload(row: WorkloadRow): Workload {
  return {
    id: row.id,
    kind: kind(row.kind),
    name: row.name,
    profile: row.profile,
    spec: JSON.parse(row.specJson) as WorkloadSpec,
    specRevision: row.specRevision,
    phase: phase(row.phase),
    reason: reason(row.reason),
    message: row.message,
    desired: desired(row),
    executionEpoch: row.executionEpoch,
    maxAttempts: row.maxAttempts,
    exitCode: row.exitCode,
    idempotencyKey: row.idempotencyKey,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    lastActiveAt: row.lastActiveAt,
  };
}

export function toAllocation(row: AllocationRow): Allocation {
  return {
    id: row.id,
    workloadId: row.workloadId,
    epoch: row.epoch,
    token: submissionToken(row.token),
    handle: row.handle === null ? null : externalHandle(row.handle),
    phase: phase(row.phase),
    reason: reason(row.reason),
    message: row.message,
    exitCode: row.exitCode,
    submittedAt: row.submittedAt,
    startedAt: row.startedAt,
    endedAt: row.endedAt,
    acknowledgedAt: row.acknowledgedAt,
  };
}

export function toEvent(row: EventRow): TransitionEvent {
  return {
    workloadId: row.workloadId,
    allocationId: row.allocationId,
    at: row.at,
    phase: phase(row.phase),
    reason: reason(row.reason),
    message: row.message,
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
