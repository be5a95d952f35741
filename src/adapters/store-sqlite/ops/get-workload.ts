import { eq } from "drizzle-orm";
import type { Workload } from "../../../core/models.ts";
import type { StoreDeps } from "../deps.ts";
import { toWorkload } from "../rows.ts";
import { workloads } from "../schema.ts";

export function getWorkload(deps: StoreDeps, id: string): Workload | null {
  const row = deps.db.select().from(workloads).where(eq(workloads.id, id)).get();
  return row ? toWorkload(row) : null;
}
