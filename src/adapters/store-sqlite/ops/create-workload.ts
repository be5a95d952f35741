import type { Allocation, Workload } from "../../../core/models.ts";
import type {
  CreateWorkloadInput,
  CreateWorkloadResult,
} from "../../../core/ports/admission-store.ts";
import type { PrincipalUsage } from "../../../core/principals.ts";
import type { StoreDeps } from "../deps.ts";
import { findWorkloadByIdempotencyKey } from "./find-workload-by-idempotency-key.ts";
import { insertAttempt } from "./mint-attempt.ts";

/**
 * Inserts a workload and its first event in one transaction, with its first attempt (token
 * and allocation) when the input carries one, or answers KeyTaken (writing nothing) when
 * another of the same owner's workloads already holds the Idempotency-Key (keys are per owner): two requests with one key can both
 * find nothing and both insert, and the unique index lets one through. Only that index's
 * conflict is expected; any other (an id collision) still throws.
 *
 * Plain SQL compiled once per connection, not drizzle builders: this is on the path from
 * POST to the scheduler's queue, where re-rendering and re-preparing the statements cost
 * more than the commit itself.
 */
export function createWorkload(deps: StoreDeps, input: CreateWorkloadInput): CreateWorkloadResult {
  const now = deps.clock.now();
  const sqlite = deps.db.$client;
  const first = input.firstAttempt ?? null;
  return sqlite.transaction((): CreateWorkloadResult => {
    if (first !== null && (input.held === true || (input.after?.length ?? 0) > 0)) {
      // An attempt minted with a held or dependent workload would be submitted at once.
      throw new Error("a held or dependent workload is created without its first attempt");
    }
    const phase = first === null ? "PENDING" : "SUBMITTING";
    const epoch = first === null ? 0 : 1;
    const held = input.held === true;
    const reason = held ? "AWAITING_RELEASE" : null;
    const message = held
      ? "created held: upload its input, then release it"
      : (first?.message ?? null);
    const after = input.after !== undefined && input.after.length > 0 ? input.after : null;
    const lastActiveAt = input.kind === "SESSION" ? now : null;
    const owner = input.owner ?? null;
    if (owner !== null && input.withinLimits !== undefined) {
      // In the same transaction as the insert: bun:sqlite runs it to the end before any
      // other request's, so concurrent submissions cannot all see the same usage.
      const exceeded = input.withinLimits(ownerUsage(sqlite, owner));
      if (exceeded !== null) return { kind: "OverLimit", exceeded };
    }
    const specJson = JSON.stringify(input.spec);
    const inserted = insertWorkloadRow(sqlite, input, {
      specJson,
      phase,
      message,
      epoch,
      now,
      lastActiveAt,
      owner,
      reason,
      held,
      afterJson: after === null ? null : JSON.stringify(after),
    });
    if (inserted.changes === 0) return keyTaken(deps, owner, input.idempotencyKey);
    sqlite
      .query<never, [string, number]>(
        "INSERT INTO events (workload_id, at, phase, message) VALUES (?, ?, 'PENDING', 'accepted')",
      )
      .run(input.id, now);
    const attempt: Allocation | null =
      first === null ? null : insertAttempt(sqlite, { ...first, workloadId: input.id, epoch, now });
    // Exactly the row just inserted: the columns not named above keep their defaults.
    const workload: Workload = {
      id: input.id,
      kind: input.kind,
      name: input.name,
      profile: input.profile,
      spec: JSON.parse(specJson),
      specRevision: 1,
      phase,
      reason,
      message,
      desired: { kind: "RUN" },
      executionEpoch: epoch,
      maxAttempts: input.maxAttempts,
      exitCode: null,
      idempotencyKey: input.idempotencyKey,
      createdAt: now,
      updatedAt: now,
      lastActiveAt,
      owner,
      ...(held ? { held: true } : {}),
      ...(after === null ? {} : { after }),
    };
    return { kind: "Created", workload, attempt };
  })();
}

/** The workload's row; `changes` is 0 when its idempotency key was taken meanwhile. */
function insertWorkloadRow(
  sqlite: StoreDeps["db"]["$client"],
  input: CreateWorkloadInput,
  row: {
    readonly specJson: string;
    readonly phase: string;
    readonly message: string | null;
    readonly epoch: number;
    readonly now: number;
    readonly lastActiveAt: number | null;
    readonly owner: string | null;
    readonly reason: string | null;
    readonly held: boolean;
    readonly afterJson: string | null;
  },
): { readonly changes: number } {
  const { specJson, phase, message, epoch, now, lastActiveAt, owner } = row;
  return sqlite
    .query<
      never,
      [
        string,
        string,
        string,
        string,
        string,
        string,
        string | null,
        number,
        number,
        string | null,
        string | null,
        number,
        number,
        number | null,
        string | null,
        number,
        number,
        string | null,
        number,
        string | null,
      ]
    >(
      "INSERT INTO workloads (id, kind, name, profile, spec_json, phase, message, execution_epoch, max_attempts, idempotency_key, request_hash, created_at, updated_at, last_active_at, owner, cpus, gpus, reason, held, after_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (coalesce(owner, ''), idempotency_key) DO NOTHING",
    )
    .run(
      input.id,
      input.kind,
      input.name,
      input.profile,
      specJson,
      phase,
      message,
      epoch,
      input.maxAttempts,
      input.idempotencyKey,
      input.requestHash,
      now,
      now,
      lastActiveAt,
      owner,
      input.cpus ?? 0,
      input.gpus ?? 0,
      row.reason,
      row.held ? 1 : 0,
      row.afterJson,
    );
}

/** The owner's live workloads and what they hold, over the workloads_owner_live index. */
function ownerUsage(sqlite: StoreDeps["db"]["$client"], owner: string): PrincipalUsage {
  const row = sqlite
    .query<{ sessions: number; batch: number; cpus: number; gpus: number }, [string]>(
      `SELECT coalesce(sum(kind = 'SESSION'), 0) AS sessions, coalesce(sum(kind = 'BATCH'), 0) AS batch,
       coalesce(sum(cpus), 0) AS cpus, coalesce(sum(gpus), 0) AS gpus
       FROM workloads WHERE owner = ? AND (${LIVE_PHASES_SQL})`,
    )
    .get(owner);
  return row ?? { sessions: 0, batch: 0, cpus: 0, gpus: 0 };
}

/** Spelled as the workloads_owner_live index's predicate, so SQLite can use the index. */
const LIVE_PHASES_SQL =
  "phase = 'PENDING' OR phase = 'SUBMITTING' OR phase = 'QUEUED' OR phase = 'RUNNING' OR phase = 'STOPPING'";

/** Read inside the transaction that lost the insert: the same owner's winner, as committed. */
function keyTaken(deps: StoreDeps, owner: string | null, key: string | null): CreateWorkloadResult {
  const winner = key === null ? null : findWorkloadByIdempotencyKey(deps, owner, key);
  if (!winner) throw new Error("insert returned no row");
  return { kind: "KeyTaken", existing: winner };
}
