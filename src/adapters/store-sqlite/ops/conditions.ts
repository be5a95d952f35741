import { and, eq } from "drizzle-orm";
import type { Condition } from "../../../core/models.ts";
import type { ConditionUpdate } from "../../../core/ports/session-store.ts";
import type { StoreDeps } from "../deps.ts";
import { toCondition } from "../rows.ts";
import { conditions } from "../schema.ts";

/**
 * Upserts a condition. lastTransitionTime moves only when the status changes, as in
 * Kubernetes: a condition re-asserted every tick keeps the time it first became true.
 */
export function setCondition(deps: StoreDeps, workloadId: string, update: ConditionUpdate): void {
  const now = deps.clock.now();
  deps.db.transaction((tx) => {
    const existing = tx
      .select()
      .from(conditions)
      .where(and(eq(conditions.workloadId, workloadId), eq(conditions.type, update.type)))
      .get();
    if (!existing) {
      tx.insert(conditions)
        .values({ workloadId, ...update, lastTransitionTime: now })
        .run();
      return;
    }
    if (
      existing.status === update.status &&
      existing.reason === update.reason &&
      existing.message === update.message
    ) {
      return;
    }
    tx.update(conditions)
      .set({
        status: update.status,
        reason: update.reason,
        message: update.message,
        lastTransitionTime: existing.status === update.status ? existing.lastTransitionTime : now,
      })
      .where(and(eq(conditions.workloadId, workloadId), eq(conditions.type, update.type)))
      .run();
  });
}

export function listConditions(deps: StoreDeps, workloadId: string): readonly Condition[] {
  return deps.db
    .select()
    .from(conditions)
    .where(eq(conditions.workloadId, workloadId))
    .all()
    .map(toCondition);
}
