/**
 * The status pages' workload list: keyset pages in both directions (older after a cursor,
 * newer before one) with an optional profile filter, one statement each. Both directions walk
 * the (created_at, id) index from the cursor, so a page costs the same at row 100,000 as at
 * row 100; an OFFSET would read every row it skips.
 */
import type { Phase, Workload, WorkloadKind } from "../../../core/models.ts";
import type { StoreDeps } from "../deps.ts";
import { toWorkload } from "../rows.ts";
import type { workloads } from "../schema.ts";

export interface WorkloadKey {
  readonly createdAt: number;
  readonly id: string;
}

export interface WorkloadPageQuery {
  readonly kind?: WorkloadKind | undefined;
  readonly phase?: Phase | undefined;
  readonly profile?: string | undefined;
  /** A principal's name, or null for the admin's own workloads. */
  readonly owner?: string | null | undefined;
  readonly limit: number;
  /** Older than this key (the next page); ignored when `before` is given. */
  readonly after?: WorkloadKey | undefined;
  /** Newer than this key (the previous page). */
  readonly before?: WorkloadKey | undefined;
}

/**
 * A row of the page that does not decode (an unknown phase, a hand edit): listed by its id
 * and why, never skipped and never a 500 for the whole page (issue 34, as the API's list).
 */
export interface UnreadableListedWorkload {
  readonly unreadable: true;
  readonly id: string;
  readonly createdAt: number;
  /** What did not decode, as the decoder said it. */
  readonly message: string;
}

export type ListedWorkload = Workload | UnreadableListedWorkload;

export function isUnreadable(w: ListedWorkload): w is UnreadableListedWorkload {
  return "unreadable" in w;
}

export interface TwoWayWorkloadPage {
  /** Newest first. */
  readonly items: readonly ListedWorkload[];
  readonly hasOlder: boolean;
  readonly hasNewer: boolean;
}

const COLUMNS = `id, kind, name, profile, spec_json AS specJson,
  spec_revision AS specRevision, phase, reason, message, message_admin AS messageAdmin, desired,
  stop_reason AS stopReason,
  stop_message AS stopMessage, execution_epoch AS executionEpoch, max_attempts AS maxAttempts,
  exit_code AS exitCode, idempotency_key AS idempotencyKey, request_hash AS requestHash,
  created_at AS createdAt, updated_at AS updatedAt, last_active_at AS lastActiveAt, owner,
  held, after_json AS afterJson`;

type Row = typeof workloads.$inferSelect;

/** The page statement for a query (exported for test/store/query-plans.test.ts). */
export function pageSql(query: WorkloadPageQuery, newer: boolean): string {
  const where: string[] = [];
  if (query.kind !== undefined) where.push("kind = $kind");
  if (query.phase !== undefined) where.push("phase = $phase");
  if (query.profile !== undefined) where.push("profile = $profile");
  if (query.owner === null) where.push("owner IS NULL");
  else if (query.owner !== undefined) where.push("owner = $owner");
  if (newer) where.push("(created_at > $at OR (created_at = $at AND id > $id))");
  else if (query.after) where.push("(created_at < $at OR (created_at = $at AND id < $id))");
  const order = newer ? "ASC" : "DESC";
  return `SELECT ${COLUMNS} FROM workloads
${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
ORDER BY created_at ${order}, id ${order} LIMIT $limit`;
}

export function listWorkloadPage(deps: StoreDeps, query: WorkloadPageQuery): TwoWayWorkloadPage {
  const newer = query.before !== undefined;
  const key = query.before ?? query.after;
  // The connection is opened `strict`: named parameters are bound without their `$`.
  const params: Record<string, string | number> = { limit: query.limit + 1 };
  if (query.kind !== undefined) params["kind"] = query.kind;
  if (query.phase !== undefined) params["phase"] = query.phase;
  if (query.profile !== undefined) params["profile"] = query.profile;
  if (typeof query.owner === "string") params["owner"] = query.owner;
  if (key) {
    params["at"] = key.createdAt;
    params["id"] = key.id;
  }
  const rows = deps.db.$client.query(pageSql(query, newer)).all(params) as Row[];
  const more = rows.length > query.limit;
  const page = rows.slice(0, query.limit).map(decodeListed);
  if (newer) {
    return { items: page.reverse(), hasOlder: true, hasNewer: more };
  }
  return { items: page, hasOlder: more, hasNewer: key !== undefined };
}

function decodeListed(row: Row): ListedWorkload {
  try {
    return toWorkload(row);
  } catch (error) {
    return {
      unreadable: true,
      id: row.id,
      createdAt: row.createdAt,
      message: error instanceof Error ? error.message : String(error),
    };
  }
}

export interface LiveProfileCount {
  readonly profile: string;
  readonly phase: Phase;
  readonly count: number;
}

/**
 * Live workloads by profile and phase. The predicate is the partial index workloads_live's
 * own, so the count reads only live rows however much history the store holds.
 */
export function countLiveWorkloadsByProfile(deps: StoreDeps): readonly LiveProfileCount[] {
  return deps.db.$client
    .query(
      `SELECT profile, phase, count(*) AS count FROM workloads INDEXED BY workloads_live
WHERE phase = 'PENDING' OR phase = 'SUBMITTING' OR phase = 'QUEUED' OR phase = 'RUNNING' OR phase = 'STOPPING'
GROUP BY profile, phase`,
    )
    .all() as LiveProfileCount[];
}
