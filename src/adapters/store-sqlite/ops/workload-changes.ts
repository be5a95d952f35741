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

/**
 * The newest `seq` ever handed out (0 before the first change), pruned or not: with
 * AUTOINCREMENT, SQLite keeps it in `sqlite_sequence` and never reuses a committed number. A reader
 * that compares it with the first row it can still read tells "nothing changed" from "the
 * changes I missed were pruned" (the API's view cache then starts over).
 */
export function latestWorkloadChangeEver(deps: StoreDeps): number {
  const row = deps.db.$client
    .query("SELECT seq FROM sqlite_sequence WHERE name = 'workload_changes'")
    .values() as [number][];
  return row[0]?.[0] ?? 0;
}

/** The oldest `seq` still in the log (null when it is empty). */
export function oldestWorkloadChange(deps: StoreDeps): number | null {
  const row = deps.db.$client.query("SELECT min(seq) FROM workload_changes").values() as [
    number | null,
  ][];
  return row[0]?.[0] ?? null;
}

/** Forgets changes up to and including `uptoSeq` (consumed by the only reader). Writes. */
export function pruneWorkloadChanges(deps: StoreDeps, uptoSeq: number): void {
  deps.db.$client.query("DELETE FROM workload_changes WHERE seq <= ?1").run(uptoSeq);
}
