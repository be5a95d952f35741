/**
 * The readiness conditions a pass writes before anything is probed: the allocation's phase,
 * the workers' connections, and "not checked" for what the probes would say. Pure values,
 * so the loop (readiness.ts) only decides which apply.
 */
import type { Allocation, Workload } from "../models.ts";
import {
  type ConditionValue,
  PROBED_REASONS,
  type ProbedConditionType,
  readyCondition,
} from "./readiness-conditions.ts";

export function allocationRunningCondition(
  workload: Workload,
  a: Allocation | null,
): ConditionValue {
  return a?.phase === "RUNNING"
    ? {
        type: "ALLOCATION_RUNNING",
        status: "TRUE",
        reason: "ALLOCATION_RUNNING",
        message: `allocation ${a.id} (epoch ${a.epoch}) is RUNNING`,
      }
    : {
        type: "ALLOCATION_RUNNING",
        status: "FALSE",
        reason: "ALLOCATION_NOT_RUNNING",
        message: a
          ? `allocation ${a.id} (epoch ${a.epoch}) is ${a.phase}`
          : `no allocation yet; the session is ${workload.phase}`,
      };
}

export function notChecked(type: ProbedConditionType, why: string): ConditionValue {
  return {
    type,
    status: "UNKNOWN",
    reason: PROBED_REASONS[type].failed,
    message: `not checked: ${why}`,
  };
}

export function workerMissing(why: string): ConditionValue {
  return { type: "WORKER_CONNECTED", status: "FALSE", reason: "WORKER_MISSING", message: why };
}

export function workerConnectedCondition(
  a: Allocation,
  ranks: number,
  missing: readonly number[],
): ConditionValue {
  return missing.length === 0
    ? {
        type: "WORKER_CONNECTED",
        status: "TRUE",
        reason: "WORKER_CONNECTED",
        message: `${ranks === 1 ? "the worker" : `all ${ranks} workers`} of epoch ${a.epoch} connected`,
      }
    : {
        type: "WORKER_CONNECTED",
        status: "FALSE",
        reason: "WORKER_MISSING",
        message: `${ranks - missing.length} of ${ranks} workers of epoch ${a.epoch} connected; waiting for rank${missing.length === 1 ? "" : "s"} ${missing.join(", ")}`,
      };
}

/** The five conditions when the probes cannot run yet (`why`), READY among them. */
export function unprobed(
  allocationRunning: ConditionValue,
  workerConnected: ConditionValue,
  why: string,
): readonly ConditionValue[] {
  const four = [
    allocationRunning,
    workerConnected,
    notChecked("WORKSPACE_VISIBLE", why),
    notChecked("KERNEL_RESPONSIVE", why),
  ];
  return [...four, readyCondition(four)];
}
