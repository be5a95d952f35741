import { and, eq, notInArray } from "drizzle-orm";
import { type Reason, TERMINAL_PHASES } from "../../../core/models.ts";
import type { RequestStopResult } from "../../../core/ports/reclaimer-store.ts";
import type { StoreDeps } from "../deps.ts";
import { workloads } from "../schema.ts";

/**
 * Records the intent to stop; the reconciler's cancel barrier does the work. The first
 * reason wins: a user cancel after an idle reclaim does not rewrite why it stopped.
 */
export function requestStop(
  deps: StoreDeps,
  workloadId: string,
  reason: Reason,
  message: string,
): RequestStopResult {
  const now = deps.clock.now();
  return deps.db.transaction((tx) => {
    const row = tx.select().from(workloads).where(eq(workloads.id, workloadId)).get();
    if (!row) return { kind: "NotFound" } as const;
    if ((TERMINAL_PHASES as readonly string[]).includes(row.phase)) {
      return { kind: "AlreadyTerminal" } as const;
    }
    if (row.desired === "STOP") {
      return { kind: "AlreadyRequested", reason: (row.stopReason ?? reason) as Reason } as const;
    }
    tx.update(workloads)
      .set({ desired: "STOP", stopReason: reason, stopMessage: message, updatedAt: now })
      .where(and(eq(workloads.id, workloadId), notInArray(workloads.phase, [...TERMINAL_PHASES])))
      .run();
    return { kind: "Requested" } as const;
  });
}
