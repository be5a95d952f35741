/**
 * The readiness conditions as values: their order, how a probe's result reads as a
 * condition, READY from the four, and the conditions of a session that ended. Pure: the loop
 * (readiness.ts) decides when to evaluate, the probes (readiness-probes.ts) what the workers say.
 */
import type { ConditionStatus, ConditionType, Workload } from "../models.ts";

/** The four readiness conditions, in the order READY names the first missing one. */
const READINESS_ORDER = [
  "ALLOCATION_RUNNING",
  "WORKER_CONNECTED",
  "WORKSPACE_VISIBLE",
  "KERNEL_RESPONSIVE",
] as const satisfies readonly ConditionType[];

export interface ConditionValue {
  readonly type: ConditionType;
  readonly status: ConditionStatus;
  readonly reason: string;
  readonly message: string;
}

/**
 * KERNEL_RESPONSIVE's reason when a worker reported its kernel dead. Exec still runs then:
 * the next exec is what starts a fresh kernel (see the session service).
 */
export const KERNEL_DIED = "KERNEL_DIED";
/**
 * KERNEL_RESPONSIVE's reason (status TRUE) while a worker's kernel is a replacement: the one
 * before died, or was restarted (asked for, or an interrupt that did not stop its cell). The
 * session is READY again; the message says how the previous one ended and that state is gone.
 */
export const KERNEL_RESTARTED = "KERNEL_RESTARTED";

export type ProbeResult =
  | { readonly ok: true; readonly message: string }
  | { readonly ok: false; readonly message: string };

export type ProbedConditionType = "WORKSPACE_VISIBLE" | "KERNEL_RESPONSIVE";

/** The reasons of the two conditions the workers are probed for, as passed and as not. */
export const PROBED_REASONS: Readonly<
  Record<ProbedConditionType, { readonly ok: string; readonly failed: string }>
> = {
  WORKSPACE_VISIBLE: { ok: "WORKSPACE_VISIBLE", failed: "WORKSPACE_NOT_VISIBLE" },
  KERNEL_RESPONSIVE: { ok: "KERNEL_RESPONSIVE", failed: "KERNEL_UNRESPONSIVE" },
};

export function probedCondition(type: ProbedConditionType, result: ProbeResult): ConditionValue {
  return {
    type,
    status: result.ok ? "TRUE" : "FALSE",
    reason: result.ok ? PROBED_REASONS[type].ok : PROBED_REASONS[type].failed,
    message: result.message,
  };
}

/** READY from the four conditions: TRUE only when all are; else the first missing one. */
export function readyCondition(conditions: readonly ConditionValue[]): ConditionValue {
  for (const type of READINESS_ORDER) {
    const c = conditions.find((x) => x.type === type);
    if (c?.status !== "TRUE") {
      return {
        type: "READY",
        status: "FALSE",
        reason: type,
        message: `${type} is ${c?.status ?? "UNKNOWN"}: ${c?.message ?? "not evaluated yet"}`,
      };
    }
  }
  return { type: "READY", status: "TRUE", reason: "READY", message: "the session is ready" };
}

export function endedConditions(workload: Workload | null): readonly ConditionValue[] {
  const how = workload
    ? `the session ended: ${workload.phase}${workload.reason ? ` (${workload.reason})` : ""}`
    : "the session no longer exists";
  const four: ConditionValue[] = [
    { type: "ALLOCATION_RUNNING", status: "FALSE", reason: "ALLOCATION_NOT_RUNNING", message: how },
    { type: "WORKER_CONNECTED", status: "FALSE", reason: "WORKER_MISSING", message: how },
    { type: "WORKSPACE_VISIBLE", status: "FALSE", reason: "WORKSPACE_NOT_VISIBLE", message: how },
    { type: "KERNEL_RESPONSIVE", status: "FALSE", reason: "KERNEL_UNRESPONSIVE", message: how },
  ];
  return [...four, readyCondition(four)];
}
