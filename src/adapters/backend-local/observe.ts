/**
 * What the local backend answers about its jobs: each target's record read (a record gone is
 * LOST, an unreadable one Indeterminate), for a full observe, for the change feed's focused
 * tick, and by submission token (INV-8: the answer after a lost submit).
 */
import type { createChangeFeed } from "../../core/change-feed.ts";
import { externalHandle, type SubmissionToken } from "../../core/models.ts";
import type {
  AllocationObservation,
  ChangeReporter,
  FindResult,
  ObservationTarget,
  ObserveResult,
} from "../../core/ports/allocation-backend.ts";
import { observationOf } from "./job-state.ts";
import type { LocalContext } from "./local-context.ts";
import { jobsDirProblem } from "./record-store.ts";
import { look } from "./supervisors.ts";

export function observeOne(ctx: LocalContext, target: ObservationTarget): AllocationObservation {
  if ((target.handle as string) !== target.token) {
    return { kind: "Indeterminate", message: `handle ${target.handle} is not a local handle` };
  }
  try {
    const looked = look(ctx, target.token, true);
    if (looked.kind === "Absent") {
      return {
        kind: "Observed",
        phase: "LOST",
        reason: "NOT_FOUND_BY_BACKEND",
        message: "no record of this job on this machine",
        exitCode: null,
        startedAt: null,
        endedAt: null,
      };
    }
    return observationOf(looked.snapshot);
  } catch (error) {
    return { kind: "Indeterminate", message: `cannot read the job record: ${String(error)}` };
  }
}

export function observeAll(
  ctx: LocalContext,
  targets: readonly ObservationTarget[],
): ObserveResult {
  ctx.count("observe");
  const problem = jobsDirProblem(ctx);
  if (problem !== null) return { kind: "Unavailable", message: problem };
  const observations = new Map<string, AllocationObservation>();
  for (const target of targets) observations.set(target.allocationId, observeOne(ctx, target));
  return { kind: "Observed", observations };
}

/**
 * The reconciler's focused tick for local jobs: every watched record is read, as a full
 * observe would read every target (the same reads, so the same decisions: a record gone
 * is LOST, an unreadable one Indeterminate), and only what differs from the last answer
 * goes back, so the tick looks at those workloads alone.
 */
export function observeChangesWith(
  ctx: LocalContext,
  feed: ReturnType<typeof createChangeFeed>,
  ...[cursor, targets]: Parameters<ChangeReporter["observeChanges"]>
): Awaited<ReturnType<ChangeReporter["observeChanges"]>> {
  ctx.count("observe");
  const opening = feed.open(cursor, targets);
  if (opening.kind === "CursorExpired") return opening;
  const problem = jobsDirProblem(ctx);
  if (problem !== null) return { kind: "Unavailable", message: problem };
  const observations = new Map<string, AllocationObservation>();
  for (const { target } of opening.watched.values()) {
    observations.set(target.allocationId, observeOne(ctx, target));
  }
  return feed.answer(opening, targets, observations);
}

export function findTokens(
  ctx: LocalContext,
  tokens: readonly SubmissionToken[],
): Map<SubmissionToken, FindResult> {
  ctx.count("findByToken");
  const problem = jobsDirProblem(ctx);
  const results = new Map<SubmissionToken, FindResult>();
  for (const token of tokens) {
    if (problem !== null) {
      results.set(token, { kind: "Unavailable", message: problem });
      continue;
    }
    try {
      const looked = look(ctx, token, true);
      results.set(
        token,
        looked.kind === "Absent"
          ? { kind: "Absent" }
          : {
              kind: "Found",
              handle: externalHandle(token),
              observation: observationOf(looked.snapshot),
            },
      );
    } catch (error) {
      results.set(token, { kind: "Unavailable", message: String(error) });
    }
  }
  return results;
}
