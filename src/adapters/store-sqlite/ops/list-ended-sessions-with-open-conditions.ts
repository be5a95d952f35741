import { and, eq, inArray, ne } from "drizzle-orm";
import { TERMINAL_PHASES } from "../../../core/models.ts";
import type { StoreDeps } from "../deps.ts";
import { conditions, workloads } from "../schema.ts";

/**
 * Terminal SESSION workloads that still have a condition that is not FALSE: a session that
 * ended while the daemon was down (or between two readiness passes) must not go on saying
 * READY. Run at startup; afterwards the readiness loop notices endings itself.
 */
export function listEndedSessionsWithOpenConditions(deps: StoreDeps): readonly string[] {
  return deps.db
    .selectDistinct({ id: workloads.id })
    .from(conditions)
    .innerJoin(workloads, eq(conditions.workloadId, workloads.id))
    .where(
      and(
        eq(workloads.kind, "SESSION"),
        inArray(workloads.phase, [...TERMINAL_PHASES]),
        ne(conditions.status, "FALSE"),
      ),
    )
    .all()
    .map((r) => r.id);
}
