import { and, eq, inArray } from "drizzle-orm";
import {
  ACTIVE_ALLOCATION_PHASES,
  type Allocation,
  type SubmissionToken,
} from "../../orchestration/models.ts";
import type { StoreDeps } from "../deps.ts";
import { toAllocation } from "../rows.ts";
import { allocations, events, workloads } from "../schema.ts";

export interface MintAttemptInput {
  readonly workloadId: string;
  readonly allocationId: string;
  readonly token: SubmissionToken;
  /** The executionEpoch the caller read; the new attempt gets expectedEpoch + 1. */
  readonly expectedEpoch: number;
  readonly message: string;
}

export type MintAttemptResult =
  | { readonly kind: "Minted"; readonly allocation: Allocation }
  /** Someone else (a previous run of this tick, another reconciler) already moved on. */
  | { readonly kind: "Stale"; readonly message: string };

/**
 * Persists a new attempt (allocation row in SUBMITTING with its token and a fresh epoch)
 * BEFORE anything is submitted: the token must be durable first, or a crash after the
 * backend accepted would leave a job nobody can find (INV-8). Compare-and-set on the epoch
 * makes a re-run of the same step a no-op instead of a second attempt; the partial unique
 * index refuses a second active allocation even if a bug got past that.
 */
export function mintAttempt(deps: StoreDeps, input: MintAttemptInput): MintAttemptResult {
  const now = deps.clock.now();
  return deps.db.transaction((tx) => {
    const w = tx.select().from(workloads).where(eq(workloads.id, input.workloadId)).get();
    if (!w) return { kind: "Stale", message: "workload does not exist" } as const;
    if (w.executionEpoch !== input.expectedEpoch) {
      return { kind: "Stale", message: `epoch moved to ${w.executionEpoch}` } as const;
    }
    const active = tx
      .select({ id: allocations.id })
      .from(allocations)
      .where(
        and(
          eq(allocations.workloadId, input.workloadId),
          inArray(allocations.phase, [...ACTIVE_ALLOCATION_PHASES]),
        ),
      )
      .get();
    if (active) return { kind: "Stale", message: `allocation ${active.id} is active` } as const;
    const epoch = input.expectedEpoch + 1;
    const [row] = tx
      .insert(allocations)
      .values({
        id: input.allocationId,
        workloadId: input.workloadId,
        epoch,
        token: input.token,
        phase: "SUBMITTING",
        createdAt: now,
      })
      .returning()
      .all();
    tx.update(workloads)
      .set({
        executionEpoch: epoch,
        phase: "SUBMITTING",
        reason: null,
        message: input.message,
        updatedAt: now,
      })
      .where(eq(workloads.id, input.workloadId))
      .run();
    tx.insert(events)
      .values({
        workloadId: input.workloadId,
        allocationId: input.allocationId,
        at: now,
        phase: "SUBMITTING",
        message: input.message,
      })
      .run();
    if (!row) throw new Error("insert returned no row");
    return { kind: "Minted", allocation: toAllocation(row) } as const;
  });
}
