/**
 * The records of ended jobs: which ones the backend still holds (the sweep's terminal facts,
 * read without starting anything), and forgetting one once the store has its end, renamed
 * away first so a crash half way never leaves a record that reads as "never started".
 */
import { randomBytes } from "node:crypto";
import { renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { isTerminal, type SubmissionToken } from "../../core/models.ts";
import type { TerminalFact } from "../../core/ports/allocation-backend.ts";
import { fsyncDir } from "../../lib/durable-fs.ts";
import { observationOf } from "./job-state.ts";
import type { LocalContext } from "./local-context.ts";
import { listTokens, sweepTemporaries } from "./record-store.ts";
import { jobDir } from "./records.ts";
import { look } from "./supervisors.ts";

export function pendingTerminalFacts(ctx: LocalContext): TerminalFact[] {
  sweepTemporaries(ctx);
  const facts: TerminalFact[] = [];
  for (const token of listTokens(ctx)) {
    try {
      // Read-only: a sweep must not start jobs the database may not know about.
      const looked = look(ctx, token, false);
      if (looked.kind === "Absent") continue;
      const observation = observationOf(looked.snapshot);
      if (observation.kind === "Observed" && isTerminal(observation.phase)) {
        facts.push({ token: token as SubmissionToken });
      }
    } catch (error) {
      ctx.log.warn("cannot read a local job record", { token, error: String(error) });
    }
  }
  return facts;
}

export function acknowledgeTerminal(ctx: LocalContext, token: SubmissionToken): void {
  const looked = look(ctx, token, false);
  if (looked.kind === "Absent") return;
  const observation = observationOf(looked.snapshot);
  if (observation.kind !== "Observed" || !isTerminal(observation.phase)) {
    ctx.log.warn("refusing to forget a local job that has not ended", { token });
    return;
  }
  // Renamed away first: a crash half way through deleting must not leave a record
  // without its claim, which would read as "never started" and run the job again.
  const trash = join(ctx.jobs, `.trash-${token}-${randomBytes(6).toString("hex")}`);
  const dir = jobDir(ctx.backendDir, token);
  renameSync(dir, trash);
  fsyncDir(ctx.jobs);
  ctx.elementsCache.delete(dir);
  rmSync(trash, { recursive: true, force: true });
  ctx.sweepCgroups();
}
