import type { Database } from "bun:sqlite";
import {
  ACTIVE_ALLOCATION_PHASES,
  type Allocation,
  type SubmissionToken,
} from "../../../core/models.ts";
import type { MintAttemptInput, MintAttemptResult } from "../../../core/ports/reconciler-store.ts";
import type { StoreDeps } from "../deps.ts";

/**
 * Persists a new attempt (allocation row in SUBMITTING with its token and a fresh epoch)
 * BEFORE anything is submitted: the token must be durable first, or a crash after the
 * backend accepted would leave a job nobody can find (INV-8). Compare-and-set on the epoch
 * makes a re-run of the same step a no-op instead of a second attempt; the partial unique
 * index refuses a second active allocation even if a bug got past that.
 *
 * Plain SQL compiled once per connection (`query` caches), not drizzle builders: a submit
 * tick mints up to 10,000 of these and re-rendering five statements per mint dominated it.
 */
export function mintAttempt(deps: StoreDeps, input: MintAttemptInput): MintAttemptResult {
  const now = deps.clock.now();
  const sqlite = deps.db.$client;
  // Nested inside mintAttempts' transaction this is a savepoint.
  return sqlite.transaction((): MintAttemptResult => {
    const w = sqlite
      .query<{ readonly execution_epoch: number }, [string]>(
        "SELECT execution_epoch FROM workloads WHERE id = ?",
      )
      .get(input.workloadId);
    if (!w) return { kind: "Stale", message: "workload does not exist" };
    if (w.execution_epoch !== input.expectedEpoch) {
      return { kind: "Stale", message: `epoch moved to ${w.execution_epoch}` };
    }
    const active = sqlite
      .query<{ readonly id: string }, [string]>(SELECT_ACTIVE_ALLOCATION)
      .get(input.workloadId);
    if (active) return { kind: "Stale", message: `allocation ${active.id} is active` };
    const epoch = input.expectedEpoch + 1;
    sqlite
      .query<never, [number, string, number, string]>(
        "UPDATE workloads SET execution_epoch = ?, phase = 'SUBMITTING', reason = NULL, message = ?, message_admin = NULL, updated_at = ? WHERE id = ?",
      )
      .run(epoch, input.message, now, input.workloadId);
    const allocation = insertAttempt(sqlite, { ...input, epoch, now });
    return { kind: "Minted", allocation };
  })();
}

/**
 * The attempt's rows: the allocation in SUBMITTING with its token, and its event. The caller
 * has set the workload's epoch and phase in the same transaction (a mint, or the creation of
 * a workload with its first attempt).
 */
export function insertAttempt(
  sqlite: Database,
  input: {
    readonly allocationId: string;
    readonly workloadId: string;
    readonly epoch: number;
    readonly token: SubmissionToken;
    readonly message: string;
    readonly now: number;
  },
): Allocation {
  // The array size from the workload's own spec, in the same statement: every attempt of an
  // array workload is an array, whichever path minted it.
  const inserted = sqlite
    .query<
      { readonly array_size: number | null },
      [string, string, number, string, number, string]
    >(
      "INSERT INTO allocations (id, workload_id, epoch, token, phase, created_at, array_size) VALUES (?, ?, ?, ?, 'SUBMITTING', ?, (SELECT json_extract(spec_json, '$.array') FROM workloads WHERE id = ?)) RETURNING array_size",
    )
    .get(
      input.allocationId,
      input.workloadId,
      input.epoch,
      input.token,
      input.now,
      input.workloadId,
    );
  const arraySize = inserted?.array_size ?? null;
  sqlite
    .query<never, [string, string, number, string]>(
      "INSERT INTO events (workload_id, allocation_id, at, phase, reason, message) VALUES (?, ?, ?, 'SUBMITTING', NULL, ?)",
    )
    .run(input.workloadId, input.allocationId, input.now, input.message);
  // Exactly the row just inserted: every other column starts NULL.
  return {
    id: input.allocationId,
    workloadId: input.workloadId,
    epoch: input.epoch,
    token: input.token,
    handle: null,
    phase: "SUBMITTING",
    reason: null,
    message: null,
    exitCode: null,
    submittedAt: null,
    startedAt: null,
    endedAt: null,
    acknowledgedAt: null,
    deadlineAt: null,
    deadlineWarnedAt: null,
    ...(arraySize === null ? {} : { arraySize }),
  };
}

// The list is our own constant, written literally so the statement text is fixed (and can
// use the partial unique index allocations_one_active_per_workload, whose predicate is the
// same chain of = joined by OR: an IN list of constants costs a temporary table per run).
const SELECT_ACTIVE_ALLOCATION = `SELECT id FROM allocations WHERE workload_id = ? AND (${ACTIVE_ALLOCATION_PHASES.map((p) => `phase = '${p}'`).join(" OR ")}) LIMIT 1`;
