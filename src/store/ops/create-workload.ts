import { eq } from "drizzle-orm";
import type {
  CreateWorkloadInput,
  CreateWorkloadResult,
} from "../../orchestration/ports/admission-store.ts";
import type { StoreDeps } from "../deps.ts";
import { toWorkload } from "../rows.ts";
import { events, workloads } from "../schema.ts";

/**
 * Inserts a PENDING workload and its first event in one transaction, or answers KeyTaken
 * (writing nothing) when another workload already holds the Idempotency-Key: two requests
 * with one key can both find nothing and both insert, and the unique index lets one through.
 * Only that index's conflict is expected; any other (an id collision) still throws.
 */
export function createWorkload(deps: StoreDeps, input: CreateWorkloadInput): CreateWorkloadResult {
  const now = deps.clock.now();
  return deps.db.transaction((tx): CreateWorkloadResult => {
    const [row] = tx
      .insert(workloads)
      .values({
        id: input.id,
        kind: input.kind,
        name: input.name,
        profile: input.profile,
        specJson: JSON.stringify(input.spec),
        phase: "PENDING",
        maxAttempts: input.maxAttempts,
        idempotencyKey: input.idempotencyKey,
        requestHash: input.requestHash,
        createdAt: now,
        updatedAt: now,
        lastActiveAt: input.kind === "SESSION" ? now : null,
      })
      .onConflictDoNothing({ target: workloads.idempotencyKey })
      .returning()
      .all();
    if (!row) {
      // Read inside the transaction that lost the insert: the winner's row, as committed.
      const key = input.idempotencyKey;
      const winner =
        key === null
          ? undefined
          : tx.select().from(workloads).where(eq(workloads.idempotencyKey, key)).get();
      if (!winner) throw new Error("insert returned no row");
      return {
        kind: "KeyTaken",
        existing: { workload: toWorkload(winner), requestHash: winner.requestHash },
      };
    }
    tx.insert(events)
      .values({ workloadId: input.id, at: now, phase: "PENDING", message: "accepted" })
      .run();
    return { kind: "Created", workload: toWorkload(row) };
  });
}
