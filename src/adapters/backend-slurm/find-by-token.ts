/**
 * Whether a submission token is already out there (INV-8): what `submit` asks first and
 * `findByToken` answers. The lookup matches JobName as well as Comment; when it cannot be
 * answered the token is Unavailable, never Absent.
 */
import { externalHandle, type SubmissionToken } from "../../core/models.ts";
import type { AllocationObservation, FindResult } from "../../core/ports/allocation-backend.ts";
import { arrayFound, carries, foundObservation, fromAccounting, pick } from "./observe-rows.ts";
import type { SlurmContext } from "./slurm-context.ts";

export type Lookup =
  | { readonly kind: "Found"; readonly jobId: string; readonly observation: AllocationObservation }
  | { readonly kind: "Absent" }
  | { readonly kind: "Unavailable"; readonly message: string };

// -------------------------------------------------------------------------------------
// Token lookup: one squeue, then one sacct for the tokens the controller does not know.
//
// Both listings are filtered by our job names, so every row is one of ours and no other
// job's free-text name can break the parse; a row then matches on JobName OR Comment.
// squeue shows the comment whatever the accounting flags; sacct keeps it only with
// job_comment and only once the job ended, which is why JobName is what the accounting
// half stands on. squeue covers every state for MinJobAge after a job ends, which closes
// the window in which accounting has not yet caught up with a job that just finished.
// -------------------------------------------------------------------------------------

export async function lookupTokens(
  ctx: SlurmContext,
  tokens: readonly SubmissionToken[],
): Promise<Map<SubmissionToken, Lookup>> {
  const out = new Map<SubmissionToken, Lookup>();
  const unique = [...new Set(tokens)];
  if (unique.length === 0) return out;
  const queue = await ctx.broker.listQueue(unique);
  if (queue.kind === "Failed") {
    ctx.noteFailure(queue.error);
    for (const t of unique) out.set(t, { kind: "Unavailable", message: queue.error.message });
    return out;
  }
  ctx.noteSuccess("squeue");
  const remaining: SubmissionToken[] = [];
  for (const token of unique) {
    const row = pick(
      ctx,
      token,
      queue.value.filter((r) => carries(r, token)),
    );
    if (row === null) remaining.push(token);
    else
      out.set(token, { kind: "Found", jobId: row.jobId, observation: foundObservation(ctx, row) });
  }
  if (remaining.length === 0) return out;
  const accounting = await ctx.broker.listAccounting({
    kind: "ByNames",
    names: remaining,
    lookbackSeconds: ctx.lookbackSeconds,
  });
  if (accounting.kind === "Failed") {
    ctx.noteFailure(accounting.error);
    for (const t of remaining) {
      out.set(t, { kind: "Unavailable", message: accounting.error.message });
    }
    return out;
  }
  ctx.noteSuccess("sacct");
  for (const token of remaining) {
    const row = pick(
      ctx,
      token,
      accounting.value.filter((r) => carries(r, token)),
    );
    out.set(
      token,
      row === null
        ? { kind: "Absent" }
        : {
            kind: "Found",
            jobId: row.jobId,
            observation:
              row.arrayTask === undefined ? fromAccounting(ctx, row) : arrayFound(row.jobId),
          },
    );
  }
  return out;
}

/** The port's findByToken: each token's job, if any, from one shared lookup. */
export async function findByToken(
  ctx: SlurmContext,
  tokens: readonly SubmissionToken[],
): Promise<Map<SubmissionToken, FindResult>> {
  const lookup = await lookupTokens(ctx, tokens);
  const out = new Map<SubmissionToken, FindResult>();
  for (const token of tokens) {
    const found = lookup.get(token) ?? { kind: "Unavailable", message: "not looked up" };
    switch (found.kind) {
      case "Found":
        out.set(token, {
          kind: "Found",
          handle: externalHandle(found.jobId),
          observation: found.observation,
        });
        break;
      case "Absent":
        out.set(token, { kind: "Absent" });
        break;
      case "Unavailable":
        out.set(token, { kind: "Unavailable", message: found.message });
        break;
      default: {
        const never: never = found;
        throw new Error(`unhandled lookup ${JSON.stringify(never)}`);
      }
    }
  }
  return out;
}
