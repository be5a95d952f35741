import {
  type Allocation,
  externalHandle,
  PHASES,
  submissionToken,
  TERMINAL_PHASES,
  type Workload,
  type WorkloadSpec,
} from "../../../core/models.ts";
import type { ReconcileItem } from "../../../core/ports/reconciler-store.ts";
import type { StoreDeps } from "../deps.ts";
import { heldAndAfter, parseDesired, parsePhase, parseReason, parseWorkloadKind } from "../rows.ts";

const terminal: ReadonlySet<string> = new Set(TERMINAL_PHASES);
// Written as literals (they are our own constants, never user input) so the statement text is
// fixed and the planner can match it against the partial index `workloads_live`, whose
// predicate is this same list: the index holds only live workloads, already in
// (created_at, id) order, so a store that keeps years of terminal history is not scanned and
// the live rows are not sorted on every tick. The planner, without statistics, prefers
// workloads_phase and a temp b-tree sort (half of a 10,000-workload tick), hence INDEXED BY:
// should the index ever stop matching, preparing the statement fails loudly instead of
// silently falling back to the sort. test/store/live-index.test.ts checks the plan.
export const LIVE_PHASES_SQL = PHASES.filter((p) => !terminal.has(p))
  .map((p) => `'${p}'`)
  .join(",");
// The predicate as the index states it since migration 0006: a chain of = joined by OR, not
// IN (...), because SQLite builds a temporary table for an IN list of three or more constants
// in an index predicate on every UPDATE that sets phase. The planner uses a partial index only
// when a term of the WHERE is the index's predicate, so this text must be that chain.
const LIVE_PREDICATE_SQL = LIVE_PHASES_SQL.split(",")
  .map((p) => `w.phase = ${p}`)
  .join(" OR ");

// Column order is the contract between this statement and the decoder below. request_hash
// and the allocation's created_at are left out: neither is part of Workload or Allocation.
export const SNAPSHOT_SQL = `
SELECT
  w.id, w.kind, w.name, w.profile, w.spec_json, w.spec_revision, w.phase, w.reason,
  w.message, w.desired, w.stop_reason, w.stop_message, w.execution_epoch, w.max_attempts,
  w.exit_code, w.idempotency_key, w.created_at, w.updated_at, w.last_active_at,
  a.id, a.epoch, a.token, a.handle, a.phase, a.reason, a.message, a.exit_code,
  a.submitted_at, a.started_at, a.ended_at, a.acknowledged_at, a.deadline_at,
  a.deadline_warned_at, a.array_size, w.owner, a.array_view_json, w.held, w.after_json,
  w.message_admin
FROM workloads w INDEXED BY workloads_live
LEFT JOIN allocations a ON a.workload_id = w.id AND a.epoch = w.execution_epoch
WHERE ${LIVE_PREDICATE_SQL}
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
  aDeadlineAt: number | null,
  aDeadlineWarnedAt: number | null,
  aArraySize: number | null,
  // Last, so the columns before it keep their places.
  owner: string | null,
  aArrayViewJson: string | null,
  held: number,
  afterJson: string | null,
  messageAdmin: string | null,
];

/**
 * The same view as `loadReconcileView` (every workload that is not terminal, with the
 * allocation of its current executionEpoch) in ONE statement, oldest workload first.
 *
 * Why a second op: the reconciler reads this every tick, and at 10,000 live workloads the
 * two ORM queries plus their per-row mapping cost more than the whole tick budget (50 ms).
 * One LEFT JOIN on the (workload_id, epoch) unique index, walked in order on the partial
 * `workloads_live` index; the statement is compiled once per connection (`query` caches it)
 * and rows are fetched as arrays and decoded straight into Workload/Allocation by the same
 * parsers as `toWorkload`/`toAllocation`, so a corrupted phase, reason, kind or token throws
 * instead of being guessed at. test/store/reconciler-ops.test.ts proves both views agree.
 *
 * The one thing decoded lazily is `spec`: the reconciler reads it only for a workload it is
 * about to prepare, and parsing 10,000 JSON documents (and keeping their garbage) per tick
 * for nothing was a fifth of a steady tick. Still re-read from the store every tick (the
 * text comes with the row); only the JSON.parse waits for the first `.spec`, and a
 * corrupted spec throws there. The reconciler asks for the spec of every workload it may
 * prepare (`decodeSpecs`) before it writes anything, so such a row still stops the tick
 * before any step.
 */
export function loadReconcileSnapshot(deps: StoreDeps): readonly ReconcileItem[] {
  const rows = deps.db.$client.query(SNAPSHOT_SQL).values() as unknown as readonly SnapshotRow[];
  const items: ReconcileItem[] = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i] as SnapshotRow;
    items[i] = { workload: decodeWorkload(r), current: decodeAllocation(r) };
  }
  return items;
}

// The same columns and join as SNAPSHOT_SQL for chosen workloads, whatever their phase
// (a workload that just became terminal must be seen, to leave a cached view).
const ITEMS_SQL = SNAPSHOT_SQL.replace(
  /FROM workloads w INDEXED BY workloads_live/,
  "FROM workloads w",
)
  .replace(`WHERE ${LIVE_PREDICATE_SQL}`, "WHERE w.id IN (SELECT value FROM json_each(?1))")
  .replace(/ORDER BY w\.created_at, w\.id/, "ORDER BY w.created_at, w.id");

/**
 * These workloads (by id), each with the allocation of its current executionEpoch, decoded
 * as `loadReconcileSnapshot` decodes them; terminal ones included, unknown ids left out.
 */
export function loadReconcileItems(
  deps: StoreDeps,
  ids: readonly string[],
): readonly ReconcileItem[] {
  if (ids.length === 0) return [];
  const rows = deps.db.$client
    .query(ITEMS_SQL)
    .values(JSON.stringify(ids)) as unknown as readonly SnapshotRow[];
  return rows.map((r) => ({ workload: decodeWorkload(r), current: decodeAllocation(r) }));
}

/**
 * Decodes the lazily kept `spec` of these workloads (of a snapshot) now; a corrupted spec
 * throws here. The port's `decodeSpecs`: the reconciler calls it for the workloads it may
 * prepare before its first step, so the laziness stays this module's business.
 */
export function decodeSpecs(items: readonly Workload[]): void {
  for (const workload of items) {
    // Reading the getter is the decode (see decodeWorkload); the value is cached there.
    const spec: unknown = workload.spec;
    if (typeof spec !== "object" || spec === null) {
      throw new Error(`workload ${workload.id}: its stored spec is not an object`);
    }
  }
}

function decodeWorkload(r: SnapshotRow): Workload {
  const specJson = r[4];
  let spec: WorkloadSpec | undefined;
  return {
    id: r[0],
    kind: parseWorkloadKind(r[1]),
    name: r[2],
    profile: r[3],
    // An own enumerable getter, not a prototype one: `{ ...workload }`, toEqual and
    // JSON.stringify all see `spec` as the plain property the type says it is.
    get spec(): WorkloadSpec {
      spec ??= JSON.parse(specJson) as WorkloadSpec;
      return spec;
    },
    specRevision: r[5],
    phase: parsePhase(r[6]),
    reason: parseReason(r[7]),
    message: r[8],
    ...(r[38] === null ? {} : { messageAdmin: r[38] }),
    desired: parseDesired(r[9], r[10], r[11]),
    executionEpoch: r[12],
    maxAttempts: r[13],
    exitCode: r[14],
    idempotencyKey: r[15],
    createdAt: r[16],
    updatedAt: r[17],
    lastActiveAt: r[18],
    owner: r[34],
    ...heldAndAfter(r[36], r[37]),
  };
}

function decodeAllocation(r: SnapshotRow): Allocation | null {
  if (r[19] === null) return null;
  return {
    id: r[19],
    workloadId: r[0],
    epoch: r[20] as number,
    token: submissionToken(r[21] as string),
    handle: r[22] === null ? null : externalHandle(r[22]),
    phase: parsePhase(r[23] as string),
    reason: parseReason(r[24]),
    message: r[25],
    exitCode: r[26],
    submittedAt: r[27],
    startedAt: r[28],
    endedAt: r[29],
    acknowledgedAt: r[30],
    deadlineAt: r[31],
    deadlineWarnedAt: r[32],
    ...(r[33] === null ? {} : { arraySize: r[33] }),
    ...(r[35] === null ? {} : { arrayViewJson: r[35] }),
  };
}
