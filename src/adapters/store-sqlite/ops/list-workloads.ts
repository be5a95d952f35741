import { and, desc, eq, inArray, lt, or, type SQL } from "drizzle-orm";
import type { Phase, Workload, WorkloadKind } from "../../../core/models.ts";
import type { StoreDeps } from "../deps.ts";
import { toWorkload } from "../rows.ts";
import { allocations, workloads } from "../schema.ts";

export interface ListWorkloadsQuery {
  readonly kind?: WorkloadKind;
  readonly phase?: Phase;
  /** Only workloads one of whose attempts held this backend job id (its handle). */
  readonly backendJobId?: string;
  /** Only this principal's workloads. */
  readonly owner?: string;
  readonly limit: number;
  /** Opaque to callers: `${createdAt}.${id}` of the last item of the previous page. */
  readonly cursor?: { readonly createdAt: number; readonly id: string };
}

export interface WorkloadPage {
  readonly items: readonly Workload[];
  readonly next: { readonly createdAt: number; readonly id: string } | null;
}

/** Newest first, keyset-paginated so a page is stable while workloads are being added. */
export function listWorkloads(deps: StoreDeps, query: ListWorkloadsQuery): WorkloadPage {
  const filters: SQL[] = [];
  if (query.kind) filters.push(eq(workloads.kind, query.kind));
  if (query.phase) filters.push(eq(workloads.phase, query.phase));
  if (query.backendJobId !== undefined) {
    const held = deps.db
      .select({ id: allocations.workloadId })
      .from(allocations)
      .where(eq(allocations.handle, query.backendJobId));
    filters.push(inArray(workloads.id, held));
  }
  if (query.owner !== undefined) filters.push(eq(workloads.owner, query.owner));
  if (query.cursor) {
    const c = query.cursor;
    const before = or(
      lt(workloads.createdAt, c.createdAt),
      and(eq(workloads.createdAt, c.createdAt), lt(workloads.id, c.id)),
    );
    if (before) filters.push(before);
  }
  const rows = deps.db
    .select()
    .from(workloads)
    .where(filters.length > 0 ? and(...filters) : undefined)
    .orderBy(desc(workloads.createdAt), desc(workloads.id))
    .limit(query.limit + 1)
    .all();
  const items = rows.slice(0, query.limit).map(toWorkload);
  const last = items.at(-1);
  return {
    items,
    next: rows.length > query.limit && last ? { createdAt: last.createdAt, id: last.id } : null,
  };
}
