import { asc, eq } from "drizzle-orm";
import type { TransitionEvent } from "../../../core/models.ts";
import type { StoreDeps } from "../deps.ts";
import { toEvent } from "../rows.ts";
import { events } from "../schema.ts";

/** Oldest first. */
export function listEvents(deps: StoreDeps, workloadId: string): readonly TransitionEvent[] {
  return deps.db
    .select()
    .from(events)
    .where(eq(events.workloadId, workloadId))
    .orderBy(asc(events.id))
    .all()
    .map(toEvent);
}
