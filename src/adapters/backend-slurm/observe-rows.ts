/**
 * Reading the scheduler's rows: a queue or accounting row as an observation, and which rows
 * carry a submission token.
 */
import { isTerminal } from "../../core/models.ts";
import type { AllocationObservation } from "../../core/ports/allocation-backend.ts";
import type { AccountingRow } from "./parse.ts";
import type { QueueRow } from "./parse-squeue.ts";
import type { SlurmContext } from "./slurm-context.ts";
import { mapJobState, mapPendingReason } from "./state-table.ts";

function observationOf(
  ctx: SlurmContext,
  source: "queue" | "accounting",
  jobId: string,
  row: {
    readonly state: string;
    readonly exit: QueueRow["exit"];
    readonly startedAt: number | null;
    readonly endedAt: number | null;
  },
  pendingReason: string,
): AllocationObservation {
  const mapping = mapJobState(row.state, row.exit);
  if (mapping.kind === "Indeterminate") {
    if (mapping.unrecognised) {
      ctx.log.warn("unrecognised job state: leaving the phase unchanged", {
        jobId,
        source,
        state: row.state.slice(0, 64),
      });
    }
    return { kind: "Indeterminate", message: mapping.message };
  }
  const started = mapping.phase !== "QUEUED";
  const ended = isTerminal(mapping.phase);
  let message = mapping.message;
  let reason = mapping.reason;
  if (mapping.phase === "QUEUED" && pendingReason !== "") {
    // Why it waits, in terms of what the user can do (HELD, LIMIT_REACHED, ...); a
    // requeued job keeps REQUEUED, which says more than the reason it waits again.
    reason ??= mapPendingReason(pendingReason);
    if (pendingReason !== "None") message = `waiting: ${pendingReason}`;
  }
  return {
    kind: "Observed",
    phase: mapping.phase,
    reason,
    message,
    exitCode: mapping.exitCode,
    startedAt: started ? row.startedAt : null,
    endedAt: ended ? row.endedAt : null,
    // squeue's EndTime of a started job is the controller's own deadline for it (start +
    // limit, moved by a suspend or an admin's new limit); of a pending one only a guess,
    // and accounting prints none until the end: only the first is reported.
    ...(source === "queue" && started && !ended ? { deadlineAt: row.endedAt } : {}),
  };
}

export const fromQueue = (ctx: SlurmContext, row: QueueRow) =>
  observationOf(ctx, "queue", row.jobId, row, row.reason);
export const fromAccounting = (ctx: SlurmContext, row: AccountingRow) =>
  observationOf(ctx, "accounting", row.jobId, row, "");

// One element's row says nothing of the array's phase (element 0 COMPLETED while 999
// wait): a token found on an array gives its handle only; the next observe reads it all.
export const arrayFound = (jobId: string): AllocationObservation => ({
  kind: "Indeterminate",
  message: `job array ${jobId} found; its elements are read on the next observation`,
});
export const foundObservation = (ctx: SlurmContext, row: QueueRow) =>
  row.arrayTask === undefined ? fromQueue(ctx, row) : arrayFound(row.jobId);

export const carries = (row: { readonly name: string; readonly comment: string }, token: string) =>
  row.name === token || row.comment === token || row.comment.startsWith(`${token}.`);

/** Several jobs under one token would be an INV-8 breach: say so, and prefer the newest. */
export function pick<R extends { readonly jobId: string }>(
  ctx: SlurmContext,
  token: string,
  rows: readonly R[],
): R | null {
  if (rows.length === 0) return null;
  const ids = new Set(rows.map((r) => r.jobId));
  if (ids.size > 1) {
    ctx.log.error("several jobs carry one submission token", { token, jobIds: [...ids] });
  }
  return rows.reduce((a, b) => (BigInt(b.jobId) > BigInt(a.jobId) ? b : a));
}
