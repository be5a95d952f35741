/** Cancelling: one scancel for every target; no answer leaves each Unavailable. */
import type { CancelResult, ObservationTarget } from "../../core/ports/allocation-backend.ts";
import type { SlurmContext } from "./slurm-context.ts";

export async function cancelAll(
  ctx: SlurmContext,
  targets: readonly ObservationTarget[],
): Promise<Map<string, CancelResult>> {
  const out = new Map<string, CancelResult>();
  if (targets.length === 0) return out;
  const result = await ctx.broker.cancelJobs([...new Set(targets.map((t) => t.handle))]);
  if (result.kind === "Failed") ctx.noteFailure(result.error);
  for (const target of targets) {
    out.set(
      target.allocationId,
      result.kind === "Answered"
        ? { kind: "Requested" }
        : { kind: "Unavailable", message: result.error.message },
    );
  }
  return out;
}
