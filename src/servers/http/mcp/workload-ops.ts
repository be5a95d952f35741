/**
 * The workload operations MCP's tools share, each the HTTP route's own steps (the same
 * schema, the same core admission, the same stop request), so a tool cannot admit what
 * POST /v1/workloads would refuse, or the other way round.
 */
import {
  getWorkload,
  listAllocations,
  listConditions,
  requestStop,
} from "../../../adapters/store-sqlite/index.ts";
import type { Workload } from "../../../core/models.ts";
import { workloadFor } from "../../../core/scheduler-words.ts";
import { submitterFor } from "../submitter.ts";
import { parseWith } from "../validation.ts";
import { type WorkloadView, workloadView } from "../views.ts";
import { refuseWhenSpoolLow } from "../workloads/routes.ts";
import { SubmitBody } from "../workloads/schemas.ts";
import { normalize, submitWorkload } from "../workloads/submit.ts";
import type { ToolContext } from "./tool-context.ts";

export function viewOf(ctx: ToolContext, workload: Workload): WorkloadView {
  const { deps } = ctx;
  return workloadView(
    // The caller's form of the message, as GET /v1/workloads/{id} gives it.
    workloadFor(ctx.caller, workload),
    listConditions(deps.store, workload.id),
    listAllocations(deps.store, workload.id),
    deps.clock.now(),
    (allocationId) => deps.reconciler.phaseConfirmedAt?.(allocationId) ?? null,
  );
}

/** POST /v1/workloads's steps for a body a tool built: admitted, or the earlier one replayed. */
export async function admit(
  ctx: ToolContext,
  body: Readonly<Record<string, unknown>>,
  idempotencyKey: string | null,
): Promise<{ readonly workload: Workload; readonly replayed: boolean }> {
  const { deps } = ctx;
  const submission = normalize(parseWith(SubmitBody, body));
  refuseWhenSpoolLow(deps);
  const outcome = await submitWorkload(
    deps,
    submission,
    idempotencyKey,
    submitterFor(deps, ctx.caller),
  );
  if (outcome.kind === "Replayed") return { workload: outcome.workload, replayed: true };
  deps.reconciler.admitted(outcome.workload, outcome.attempt);
  deps.log.info("workload accepted", {
    workloadId: outcome.workload.id,
    kind: outcome.workload.kind,
    profile: outcome.workload.profile,
    door: "mcp",
  });
  return { workload: outcome.workload, replayed: false };
}

/** POST /v1/workloads/{id}/cancel's step: idempotent, the reconciler woken. */
export function stop(ctx: ToolContext, workload: Workload): WorkloadView {
  const { deps } = ctx;
  const result = requestStop(deps.store, workload.id, "USER_CANCELLED", "cancelled by the user");
  if (result.kind === "Requested") {
    deps.log.info("cancel requested", { workloadId: workload.id, door: "mcp" });
    deps.reconciler.wake();
  }
  return viewOf(ctx, getWorkload(deps.store, workload.id) ?? workload);
}
