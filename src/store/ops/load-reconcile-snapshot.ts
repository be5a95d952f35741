import { sql } from "drizzle-orm";
import { PHASES, TERMINAL_PHASES } from "../../orchestration/models.ts";
import type { StoreDeps } from "../deps.ts";
import { toAllocation, toWorkload } from "../rows.ts";
import type { allocations, workloads } from "../schema.ts";
import type { ReconcileItem } from "./load-reconcile-view.ts";

type WorkloadRow = typeof workloads.$inferSelect;
type AllocationRow = typeof allocations.$inferSelect;

const terminal: ReadonlySet<string> = new Set(TERMINAL_PHASES);
// Written as literals (they are our own constants, never user input) so the statement text is
// fixed and the planner sees `phase IN (...)` on the phase index: a store that keeps years of
// terminal history must not make every tick scan it.
const LIVE_PHASES_SQL = PHASES.filter((p) => !terminal.has(p))
  .map((p) => `'${p}'`)
  .join(",");

// Column order is the contract between this statement and the decoder below. request_hash
// and the allocation's created_at are left out: neither is part of Workload or Allocation.
const SNAPSHOT_SQL = `
SELECT
  w.id, w.kind, w.name, w.profile, w.spec_json, w.spec_revision, w.phase, w.reason,
  w.message, w.desired, w.stop_reason, w.stop_message, w.execution_epoch, w.max_attempts,
  w.exit_code, w.idempotency_key, w.created_at, w.updated_at, w.last_active_at,
  a.id, a.epoch, a.token, a.handle, a.phase, a.reason, a.message, a.exit_code,
  a.submitted_at, a.started_at, a.ended_at, a.acknowledged_at
FROM workloads w
LEFT JOIN allocations a ON a.workload_id = w.id AND a.epoch = w.execution_epoch
WHERE w.phase IN (${LIVE_PHASES_SQL})
ORDER BY w.created_at, w.id`;

type SnapshotRow = [
  id: string,
  kind: string,
  name: string,
  profile: string,
  specJson: string,
  specRevision: number,
  phase: string,
  reason: string | null,
  message: string | null,
  desired: string,
  stopReason: string | null,
  stopMessage: string | null,
  executionEpoch: number,
  maxAttempts: number,
  exitCode: number | null,
  idempotencyKey: string | null,
  createdAt: number,
  updatedAt: number,
  lastActiveAt: number | null,
  aId: string | null,
  aEpoch: number | null,
  aToken: string | null,
  aHandle: string | null,
  aPhase: string | null,
  aReason: string | null,
  aMessage: string | null,
  aExitCode: number | null,
  aSubmittedAt: number | null,
  aStartedAt: number | null,
  aEndedAt: number | null,
  aAcknowledgedAt: number | null,
];

/**
 * The same view as `loadReconcileView` (every workload that is not terminal, with the
 * allocation of its current executionEpoch) in ONE statement, oldest workload first.
 *
 * Why a second op: the reconciler reads this every tick, and at 10,000 live workloads the
 * two ORM queries plus their per-row mapping cost more than the whole tick budget (50 ms).
 * One LEFT JOIN on the (workload_id, epoch) unique index, rows fetched as arrays, and each
 * row still decoded by the same `toWorkload`/`toAllocation` parsers, so a corrupted row
 * throws instead of being guessed at. test/store/reconciler-ops.test.ts proves both views
 * agree.
 */
export function loadReconcileSnapshot(deps: StoreDeps): readonly ReconcileItem[] {
  const rows = deps.db.values<SnapshotRow>(sql.raw(SNAPSHOT_SQL));
  const items: ReconcileItem[] = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i] as SnapshotRow;
    const workloadRow: WorkloadRow = {
      id: r[0],
      kind: r[1],
      name: r[2],
      profile: r[3],
      specJson: r[4],
      specRevision: r[5],
      phase: r[6],
      reason: r[7],
      message: r[8],
      desired: r[9],
      stopReason: r[10],
      stopMessage: r[11],
      executionEpoch: r[12],
      maxAttempts: r[13],
      exitCode: r[14],
      idempotencyKey: r[15],
      requestHash: null,
      createdAt: r[16],
      updatedAt: r[17],
      lastActiveAt: r[18],
    };
    const current =
      r[19] === null
        ? null
        : toAllocation({
            id: r[19],
            workloadId: r[0],
            epoch: r[20] as number,
            token: r[21] as string,
            handle: r[22],
            phase: r[23] as string,
            reason: r[24],
            message: r[25],
            exitCode: r[26],
            submittedAt: r[27],
            startedAt: r[28],
            endedAt: r[29],
            acknowledgedAt: r[30],
            createdAt: 0,
          } satisfies AllocationRow);
    items[i] = { workload: toWorkload(workloadRow), current };
  }
  return items;
}
