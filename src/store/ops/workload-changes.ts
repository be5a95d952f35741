/**
 * The change counter behind the reconciler's cached live view (table `workload_changes`,
 * filled by triggers on every insert or update of a workload or allocation).
 */
import type { StoreDeps } from "../deps.ts";

export interface WorkloadChanges {
  /** The highest `seq` read (the caller's next `afterSeq`). */
  readonly lastSeq: number;
  /** Workloads written since `afterSeq`, each once. */
  readonly workloadIds: readonly string[];
}

export function readWorkloadChanges(deps: StoreDeps, afterSeq: number): WorkloadChanges {
  const rows = deps.db.$client
    .query("SELECT seq, workload_id FROM workload_changes WHERE seq > ?1 ORDER BY seq")
    .values(afterSeq) as [number, string][];
  const ids = new Set<string>();
  let lastSeq = afterSeq;
  for (const [seq, id] of rows) {
    ids.add(id);
    lastSeq = seq;
  }
  return { lastSeq, workloadIds: [...ids] };
}

/** The newest `seq` (0 when the log is empty). */
export function latestWorkloadChange(deps: StoreDeps): number {
  const row = deps.db.$client.query("SELECT max(seq) FROM workload_changes").values() as [
    number | null,
  ][];
  return row[0]?.[0] ?? 0;
}

/** Forgets changes up to and including `uptoSeq` (consumed by the only reader). Writes. */
export function pruneWorkloadChanges(deps: StoreDeps, uptoSeq: number): void {
  deps.db.$client.query("DELETE FROM workload_changes WHERE seq <= ?1").run(uptoSeq);
}
