import { and, eq, sql } from "drizzle-orm";
import type { IdempotentMatch } from "../../../core/ports/admission-store.ts";
import type { StoreDeps } from "../deps.ts";
import { toWorkload } from "../rows.ts";
import { workloads } from "../schema.ts";

/**
 * The owner's workload holding this key: keys are each owner's own (migration 0011), so
 * another principal's use of a key is never found and cannot be learned from a 409.
 * Spelled as the workloads_owner_idempotency_key index's expression, so SQLite uses it.
 */
export function findWorkloadByIdempotencyKey(
  deps: StoreDeps,
  owner: string | null,
  key: string,
): IdempotentMatch | null {
  const row = deps.db
    .select()
    .from(workloads)
    .where(
      and(
        sql`coalesce(${workloads.owner}, '') = ${owner ?? ""}`,
        eq(workloads.idempotencyKey, key),
      ),
    )
    .get();
  return row ? { workload: toWorkload(row), requestHash: row.requestHash } : null;
}
