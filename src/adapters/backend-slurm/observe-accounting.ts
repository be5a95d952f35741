/**
 * A job the controller no longer shows: accounting's word on it, LOST only on evidence (absent
 * from both, over several observations and a grace period), and the numbers (memory, time)
 * an ending a person acts on gets from accounting.
 */
import { isTerminal } from "../../core/models.ts";
import type {
  AllocationObservation,
  ObservationTarget,
  ObserveResult,
} from "../../core/ports/allocation-backend.ts";
import { explainEnding, needsUsage, usagePending } from "./end-hints.ts";
import { carries, fromAccounting, pick } from "./observe-rows.ts";
import type { AccountingRow } from "./parse.ts";
import type { Absence, SlurmContext } from "./slurm-context.ts";
import { normaliseState } from "./state-table.ts";

/** sacct's placeholder name for a job whose record has not received its real name yet. */
const ACCOUNTING_PLACEHOLDER_NAME = "allocation";

/**
 * One more successful observation without the job. LOST only after both the count and the
 * time say so; until then Indeterminate, which changes nothing.
 */
export function absent(
  ctx: SlurmContext,
  target: ObservationTarget,
  why: string,
): AllocationObservation {
  const now = ctx.clock.now();
  const previous = ctx.absences.get(target.allocationId);
  const entry: Absence =
    previous === undefined || previous.handle !== target.handle
      ? { handle: target.handle, since: now, count: 1 }
      : { ...previous, count: previous.count + 1 };
  ctx.absences.set(target.allocationId, entry);
  const forMs = now - entry.since;
  if (entry.count >= ctx.lostMinObservations && forMs >= ctx.lostGraceMs) {
    ctx.log.warn("job is in neither the queue nor accounting: LOST", {
      allocationId: target.allocationId,
      jobId: target.handle,
      observations: entry.count,
      forMs,
    });
    return {
      kind: "Observed",
      phase: "LOST",
      reason: "NOT_FOUND_BY_BACKEND",
      message: `job ${target.handle} ${why} for ${Math.round(forMs / 1000)} s over ${entry.count} observations`,
      exitCode: null,
      startedAt: null,
      endedAt: null,
    };
  }
  return {
    kind: "Indeterminate",
    message: `job ${target.handle} ${why} (${entry.count} of ${ctx.lostMinObservations} observations, ${Math.round(forMs / 1000)} s of ${Math.round(ctx.lostGraceMs / 1000)} s)`,
  };
}

export function accountingObservation(
  ctx: SlurmContext,
  target: ObservationTarget,
  rows: readonly AccountingRow[],
): AllocationObservation {
  const sameId = rows.filter((r) => r.jobId === target.handle);
  const ours = pick(
    ctx,
    target.token,
    sameId.filter((r) => carries(r, target.token)),
  );
  if (ours === null) {
    if (sameId.some((r) => r.name === ACCOUNTING_PLACEHOLDER_NAME)) {
      // Accounting has the id but not yet its name: lag, not absence.
      return {
        kind: "Indeterminate",
        message: `accounting has job ${target.handle} without its name yet`,
      };
    }
    return absent(ctx, target, "is in neither the queue nor accounting");
  }
  const observation = fromAccounting(ctx, ours);
  if (observation.kind === "Observed" && !isTerminal(observation.phase)) {
    // The controller no longer knows the job, but accounting still says it lives: either
    // accounting lags, or the controller lost it. Only time tells which.
    return absent(
      ctx,
      target,
      `is not in the queue while accounting says ${normaliseState(ours.state)}`,
    );
  }
  ctx.absences.delete(target.allocationId);
  return observation;
}

/**
 * Failures that a person acts on by numbers (memory, time) get them: one sacct for every
 * such ending of this observation. Without an answer the ending stands as observed; a
 * SIGKILL without memory figures yet waits (Indeterminate) for at most the grace.
 */
export async function explainEndings(
  ctx: SlurmContext,
  observations: Map<string, AllocationObservation>,
  targets: readonly ObservationTarget[],
): Promise<ObserveResult> {
  const wanting = targets.filter((t) => {
    const o = observations.get(t.allocationId);
    return o !== undefined && needsUsage(o);
  });
  if (wanting.length === 0) return { kind: "Observed", observations };
  const usage = await ctx.broker.listUsage([...new Set(wanting.map((t) => t.handle))]);
  if (usage.kind === "Failed") ctx.noteFailure(usage.error);
  const byJob = new Map(usage.kind === "Answered" ? usage.value.map((u) => [u.jobId, u]) : []);
  for (const t of wanting) {
    const o = observations.get(t.allocationId);
    if (o === undefined || !needsUsage(o)) continue;
    const u = byJob.get(t.handle);
    if (usagePending(o, u, ctx.clock.now(), ctx.usageGraceMs)) {
      observations.set(t.allocationId, {
        kind: "Indeterminate",
        message: `job ${t.handle} was killed; waiting for accounting to say whether memory ran out`,
      });
    } else {
      observations.set(t.allocationId, explainEnding(o, u, ctx.placements.profiles()));
    }
  }
  return { kind: "Observed", observations };
}
