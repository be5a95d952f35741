import { eq, inArray } from "drizzle-orm";
import type { SubmissionToken } from "../../../core/models.ts";
import type { AllocationWithWorkload } from "../../../core/ports/reconciler-store.ts";
import type { StoreDeps } from "../deps.ts";
import { toAllocation, toWorkload } from "../rows.ts";
import { allocations, workloads } from "../schema.ts";

// Well under SQLite's bound-parameter limit, whatever the build.
const CHUNK = 500;

/**
 * The allocations carrying these tokens, each with its workload as stored right now. Tokens
 * the store does not know are simply absent from the result. Used to re-read durable state
 * before acknowledging a backend's terminal fact.
 */
export function findAllocationsByTokens(
  deps: StoreDeps,
  tokens: readonly SubmissionToken[],
): readonly AllocationWithWorkload[] {
  const out: AllocationWithWorkload[] = [];
  for (let i = 0; i < tokens.length; i += CHUNK) {
    const rows = deps.db
      .select({ a: allocations, w: workloads })
      .from(allocations)
      .innerJoin(workloads, eq(allocations.workloadId, workloads.id))
      .where(inArray(allocations.token, tokens.slice(i, i + CHUNK)))
      .all();
    for (const { a, w } of rows) out.push({ allocation: toAllocation(a), workload: toWorkload(w) });
  }
  return out;
}
