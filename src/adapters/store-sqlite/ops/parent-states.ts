import type { ParentState } from "../../../core/dependencies.ts";
import type { StoreDeps } from "../deps.ts";
import { parsePhase, parseReason } from "../rows.ts";

/**
 * Phase and reason of each of these workloads that exists (live or ended): what the
 * reconciler decides a dependent's dependencies on (core/dependencies.ts). By primary key,
 * one row each: only dependents waiting to be submitted ask.
 */
export function parentStates(
  deps: StoreDeps,
  ids: readonly string[],
): ReadonlyMap<string, ParentState> {
  const out = new Map<string, ParentState>();
  const query = deps.db.$client.query<{ phase: string; reason: string | null }, [string]>(
    "SELECT phase, reason FROM workloads WHERE id = ?",
  );
  for (const id of new Set(ids)) {
    const row = query.get(id);
    if (row !== null)
      out.set(id, { phase: parsePhase(row.phase), reason: parseReason(row.reason) });
  }
  return out;
}
