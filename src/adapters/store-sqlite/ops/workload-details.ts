/**
 * The read paths behind `GET /v1/workloads` and `GET /v1/workloads/{id}`: workloads with
 * their conditions and allocations, in a fixed number of statements per page whatever its
 * size: one for the workloads, one for all their conditions, one for all their
 * allocations. The failure this replaces: two more ORM queries per listed workload, so a
 * page of 100 cost 201 queries and the route served 47 requests/s at 32 connections.
 *
 * Every statement's text is fixed (the list's optional filters pick one of a few texts), so
 * `query()` compiles each once per connection and reuses it. Ids are passed as one JSON
 * array (`json_each`), which keeps the statement text independent of the page size; the
 * lookups still walk the (workload_id, ...) indexes. Rows come back with the ORM's column
 * names and are decoded by the same `toWorkload`/`toAllocation`/`toCondition`, so a
 * corrupted value throws exactly as it did through the ORM.
 */
import type { Allocation, Condition, Workload } from "../../../core/models.ts";
import type { StoreDeps } from "../deps.ts";
import { toAllocation, toCondition, toWorkload } from "../rows.ts";
import type { allocations, conditions, workloads } from "../schema.ts";
import type { ListWorkloadsQuery } from "./list-workloads.ts";

type WorkloadRow = typeof workloads.$inferSelect;
type AllocationRow = typeof allocations.$inferSelect;
type ConditionRow = typeof conditions.$inferSelect;

export interface WorkloadDetails {
  readonly workload: Workload;
  readonly conditions: readonly Condition[];
  /** Oldest epoch first. */
  readonly allocations: readonly Allocation[];
}

export interface WorkloadDetailsPage {
  readonly items: readonly WorkloadDetails[];
  readonly next: { readonly createdAt: number; readonly id: string } | null;
}

const WORKLOAD_COLUMNS = `id, kind, name, profile, spec_json AS specJson,
  spec_revision AS specRevision, phase, reason, message, message_admin AS messageAdmin, desired,
  stop_reason AS stopReason,
  stop_message AS stopMessage, execution_epoch AS executionEpoch, max_attempts AS maxAttempts,
  exit_code AS exitCode, idempotency_key AS idempotencyKey, request_hash AS requestHash,
  created_at AS createdAt, updated_at AS updatedAt, last_active_at AS lastActiveAt, owner,
  held, after_json AS afterJson`;

// The statements below are exported for test/store/query-plans.test.ts, which checks that
// each finds its rows by key, however many the store holds.
export const ALLOCATIONS_SQL = `SELECT id, workload_id AS workloadId, epoch, token, handle, phase,
  reason, message, exit_code AS exitCode, submitted_at AS submittedAt,
  started_at AS startedAt, ended_at AS endedAt, acknowledged_at AS acknowledgedAt,
  created_at AS createdAt, deadline_at AS deadlineAt, deadline_warned_at AS deadlineWarnedAt,
  array_size AS arraySize, array_view_json AS arrayViewJson
FROM allocations WHERE workload_id IN (SELECT value FROM json_each(?1))
ORDER BY workload_id, epoch`;

export const CONDITIONS_SQL = `SELECT workload_id AS workloadId, type, status, reason, message,
  last_transition_time AS lastTransitionTime
FROM conditions WHERE workload_id IN (SELECT value FROM json_each(?1))
ORDER BY workload_id, type`;

export const SHOW_SQL = `SELECT ${WORKLOAD_COLUMNS} FROM workloads WHERE id = ?1`;

export const BY_IDS_SQL = `SELECT ${WORKLOAD_COLUMNS} FROM workloads
WHERE id IN (SELECT value FROM json_each(?1))`;

/** The list statement for a query (exported for test/store/query-plans.test.ts). */
export function listSql(query: ListWorkloadsQuery, columns: string): string {
  const where: string[] = [];
  if (query.owner !== undefined) where.push("owner = $owner");
  if (query.kind !== undefined) where.push("kind = $kind");
  if (query.phase !== undefined) where.push("phase = $phase");
  // An admin matching a scheduler's job to its workload: any attempt that held that id.
  if (query.backendJobId !== undefined) {
    where.push("id IN (SELECT workload_id FROM allocations WHERE handle = $handle)");
  }
  if (query.cursor) where.push("(created_at < $at OR (created_at = $at AND id < $id))");
  return `SELECT ${columns} FROM workloads
${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
ORDER BY created_at DESC, id DESC LIMIT $limit`;
}

function listParams(query: ListWorkloadsQuery): Record<string, string | number> {
  // The connection is opened `strict`: named parameters are bound without their `$`.
  const params: Record<string, string | number> = { limit: query.limit + 1 };
  if (query.owner !== undefined) params["owner"] = query.owner;
  if (query.kind !== undefined) params["kind"] = query.kind;
  if (query.phase !== undefined) params["phase"] = query.phase;
  if (query.backendJobId !== undefined) params["handle"] = query.backendJobId;
  if (query.cursor) {
    params["at"] = query.cursor.createdAt;
    params["id"] = query.cursor.id;
  }
  return params;
}

/** Conditions and allocations of these workloads: two statements, whatever their number. */
function withDetails(deps: StoreDeps, list: readonly Workload[]): WorkloadDetails[] {
  if (list.length === 0) return [];
  const ids = JSON.stringify(list.map((w) => w.id));
  const client = deps.db.$client;
  const byWorkload = new Map<string, { conditions: Condition[]; allocations: Allocation[] }>();
  for (const w of list) byWorkload.set(w.id, { conditions: [], allocations: [] });
  for (const row of client.query(CONDITIONS_SQL).all(ids) as ConditionRow[]) {
    byWorkload.get(row.workloadId)?.conditions.push(toCondition(row));
  }
  for (const row of client.query(ALLOCATIONS_SQL).all(ids) as AllocationRow[]) {
    byWorkload.get(row.workloadId)?.allocations.push(toAllocation(row));
  }
  return list.map((workload) => {
    const d = byWorkload.get(workload.id);
    return { workload, conditions: d?.conditions ?? [], allocations: d?.allocations ?? [] };
  });
}

/** Newest first, keyset-paginated, as `listWorkloads`, with each workload's details. */
export function listWorkloadDetails(
  deps: StoreDeps,
  query: ListWorkloadsQuery,
): WorkloadDetailsPage {
  const sql = listSql(query, WORKLOAD_COLUMNS);
  const rows = deps.db.$client.query(sql).all(listParams(query)) as WorkloadRow[];
  const items = rows.slice(0, query.limit).map(toWorkload);
  const last = items.at(-1);
  return {
    items: withDetails(deps, items),
    next: rows.length > query.limit && last ? { createdAt: last.createdAt, id: last.id } : null,
  };
}

/** One workload with its details, or null: three prepared statements. */
export function getWorkloadDetails(deps: StoreDeps, id: string): WorkloadDetails | null {
  const row = deps.db.$client.query(SHOW_SQL).get(id) as WorkloadRow | null;
  if (row === null) return null;
  return withDetails(deps, [toWorkload(row)])[0] ?? null;
}

export interface WorkloadIdPage {
  /** Newest first, as `listWorkloadDetails` orders them. */
  readonly ids: readonly string[];
  readonly next: { readonly createdAt: number; readonly id: string } | null;
}

/**
 * The same page as `listWorkloadDetails`, ids only: without filters the statement reads
 * nothing but the (created_at, id) index. For a caller that keeps the rest (the API's
 * serialized views) and fetches details only for the workloads it does not hold.
 */
export function listWorkloadIds(deps: StoreDeps, query: ListWorkloadsQuery): WorkloadIdPage {
  const sql = listSql(query, "id, created_at");
  const rows = deps.db.$client.query(sql).values(listParams(query)) as [string, number][];
  const ids = rows.slice(0, query.limit).map(([id]) => id);
  const last = rows[query.limit - 1];
  return {
    ids,
    next: rows.length > query.limit && last ? { createdAt: last[1], id: last[0] } : null,
  };
}

/** These workloads with their details, in no particular order; unknown ids are left out. */
export function getWorkloadDetailsByIds(
  deps: StoreDeps,
  ids: readonly string[],
): WorkloadDetails[] {
  if (ids.length === 0) return [];
  const rows = deps.db.$client.query(BY_IDS_SQL).all(JSON.stringify(ids)) as WorkloadRow[];
  return withDetails(deps, rows.map(toWorkload));
}

/** A workload whose stored row (or one of its allocations' or conditions') does not parse. */
export interface UnreadableWorkload {
  readonly id: string;
  /** What did not parse, as the decoder said it. */
  readonly message: string;
}

export interface WorkloadDetailsRead {
  readonly details: readonly WorkloadDetails[];
  readonly unreadable: readonly UnreadableWorkload[];
}

/**
 * `getWorkloadDetailsByIds` for a page that must be served whatever one row holds: a
 * workload whose row, conditions or allocations do not decode (a token off the pattern, an
 * unknown phase: a corrupted store or a hand edit) is answered as unreadable, by id, and
 * every other is decoded as usual. Issue 34: one such row made every list a 500.
 */
export function readWorkloadDetailsByIds(
  deps: StoreDeps,
  ids: readonly string[],
): WorkloadDetailsRead {
  if (ids.length === 0) return { details: [], unreadable: [] };
  const client = deps.db.$client;
  const json = JSON.stringify(ids);
  const rows = client.query(BY_IDS_SQL).all(json) as WorkloadRow[];
  const raw = new Map<string, { conditions: ConditionRow[]; allocations: AllocationRow[] }>();
  for (const row of rows) raw.set(row.id, { conditions: [], allocations: [] });
  for (const row of client.query(CONDITIONS_SQL).all(json) as ConditionRow[]) {
    raw.get(row.workloadId)?.conditions.push(row);
  }
  for (const row of client.query(ALLOCATIONS_SQL).all(json) as AllocationRow[]) {
    raw.get(row.workloadId)?.allocations.push(row);
  }
  const details: WorkloadDetails[] = [];
  const unreadable: UnreadableWorkload[] = [];
  for (const row of rows) {
    const held = raw.get(row.id);
    try {
      details.push({
        workload: toWorkload(row),
        conditions: (held?.conditions ?? []).map(toCondition),
        allocations: (held?.allocations ?? []).map(toAllocation),
      });
    } catch (error) {
      unreadable.push({
        id: row.id,
        message: error instanceof Error ? error.message : String(error),
      });
    }
  }
  return { details, unreadable };
}
