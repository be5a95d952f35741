import type { StoreDeps } from "../deps.ts";

/**
 * The owner (null: the admin) of each of these workloads that exists. Admission reads it to
 * refuse a dependency on another principal's workload exactly as on a missing one.
 */
export function workloadOwners(
  deps: StoreDeps,
  ids: readonly string[],
): ReadonlyMap<string, string | null> {
  const out = new Map<string, string | null>();
  const query = deps.db.$client.query<{ owner: string | null }, [string]>(
    "SELECT owner FROM workloads WHERE id = ?",
  );
  for (const id of ids) {
    const row = query.get(id);
    if (row !== null) out.set(id, row.owner);
  }
  return out;
}
