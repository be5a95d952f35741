import type { Workload, WorkloadKind, WorkloadSpec } from "../../orchestration/models.ts";
import type { StoreDeps } from "../deps.ts";
import { toWorkload } from "../rows.ts";
import { events, workloads } from "../schema.ts";

export interface CreateWorkloadInput {
  readonly id: string;
  readonly kind: WorkloadKind;
  readonly name: string;
  readonly profile: string;
  readonly spec: WorkloadSpec;
  readonly maxAttempts: number;
  readonly idempotencyKey: string | null;
  readonly requestHash: string | null;
}

/** Inserts a PENDING workload and its first event in one transaction. */
export function createWorkload(deps: StoreDeps, input: CreateWorkloadInput): Workload {
  const now = deps.clock.now();
  return deps.db.transaction((tx) => {
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
      .returning()
      .all();
    tx.insert(events)
      .values({ workloadId: input.id, at: now, phase: "PENDING", message: "accepted" })
      .run();
    if (!row) throw new Error("insert returned no row");
    return toWorkload(row);
  });
}
