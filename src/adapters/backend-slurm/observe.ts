/**
 * Observation, batched so scheduler calls per tick stay constant as jobs grow: one squeue
 * for every target (filtered by our job names, all states, so a job that ended less than
 * MinJobAge ago is still read from the controller), and one sacct only for the targets that
 * have left the controller.
 */
import type {
  AllocationObservation,
  ObservationTarget,
  ObserveResult,
} from "../../core/ports/allocation-backend.ts";
import { accountingObservation, explainEndings } from "./observe-accounting.ts";
import { finishArrays, readArrays } from "./observe-arrays.ts";
import { carries, fromQueue } from "./observe-rows.ts";
import type { QueueRow } from "./parse-squeue.ts";
import type { SlurmContext } from "./slurm-context.ts";

/**
 * The targets' observations from one listing of the controller (`queueRows`, by job id),
 * with one sacct for those that left it: what `observe` and `observeChanges` share, so
 * the full and the incremental path decide alike (INV-5: LOST only on evidence).
 */
export async function observeListed(
  ctx: SlurmContext,
  targets: readonly ObservationTarget[],
  queueRows: ReadonlyMap<string, QueueRow>,
  /** An array's element rows in the same listing, by the array's job id. */
  elementRowsOf: (handle: string) => readonly QueueRow[],
): Promise<ObserveResult> {
  const observations = new Map<string, AllocationObservation>();
  const singles = targets.filter((t) => t.arraySize === undefined);
  const gone: ObservationTarget[] = [];
  for (const target of singles) {
    const row = queueRows.get(target.handle);
    if (row !== undefined && carries(row, target.token)) {
      ctx.absences.delete(target.allocationId);
      observations.set(target.allocationId, fromQueue(ctx, row));
    } else {
      gone.push(target);
    }
  }
  const arrays = readArrays(ctx, targets, elementRowsOf);
  if (gone.length === 0 && arrays.incomplete.length === 0) {
    finishArrays(ctx, arrays, null, observations);
    return explainEndings(ctx, observations, singles);
  }

  const accounting = await ctx.broker.listAccounting({
    kind: "ByJobIds",
    jobIds: [...new Set([...gone, ...arrays.incomplete].map((t) => t.handle))],
  });
  if (accounting.kind === "Failed") {
    ctx.noteFailure(accounting.error);
    // The controller answered, accounting did not: no evidence either way for these.
    for (const target of gone) {
      observations.set(target.allocationId, {
        kind: "Indeterminate",
        message: `not in the queue, and accounting did not answer: ${accounting.error.message}`,
      });
    }
    finishArrays(ctx, arrays, { failed: accounting.error.message }, observations);
    return explainEndings(ctx, observations, singles);
  }
  ctx.noteSuccess("sacct");
  for (const target of gone) {
    observations.set(target.allocationId, accountingObservation(ctx, target, accounting.value));
  }
  finishArrays(ctx, arrays, { rows: accounting.value }, observations);
  return explainEndings(ctx, observations, singles);
}

/** The port's observe: one squeue for every target, one sacct for those that left it. */
export async function observeAll(
  ctx: SlurmContext,
  targets: readonly ObservationTarget[],
): Promise<ObserveResult> {
  const wanted = new Set(targets.map((t) => t.allocationId));
  for (const id of ctx.absences.keys()) if (!wanted.has(id)) ctx.absences.delete(id);
  if (targets.length === 0) return { kind: "Observed", observations: new Map() };

  const queue = await ctx.broker.listQueue([...new Set(targets.map((t) => t.token))]);
  if (queue.kind === "Failed") {
    ctx.noteFailure(queue.error);
    return { kind: "Unavailable", message: queue.error.message };
  }
  ctx.noteSuccess("squeue");
  // A job array's rows are read by readArrays only: a single job's target never meets one.
  const byId = new Map<string, QueueRow>();
  const elementRows = new Map<string, QueueRow[]>();
  for (const row of queue.value) {
    if (row.arrayTask === undefined) {
      byId.set(row.jobId, row);
      continue;
    }
    const rows = elementRows.get(row.jobId);
    if (rows === undefined) elementRows.set(row.jobId, [row]);
    else rows.push(row);
  }
  return observeListed(ctx, targets, byId, (handle) => elementRows.get(handle) ?? []);
}
