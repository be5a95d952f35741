import { eq } from "drizzle-orm";
import type { IdempotentMatch } from "../../../core/ports/admission-store.ts";
import type { StoreDeps } from "../deps.ts";
import { toWorkload } from "../rows.ts";
import { workloads } from "../schema.ts";

export function findWorkloadByIdempotencyKey(deps: StoreDeps, key: string): IdempotentMatch | null {
  const row = deps.db.select().from(workloads).where(eq(workloads.idempotencyKey, key)).get();
  return row ? { workload: toWorkload(row), requestHash: row.requestHash } : null;
}
