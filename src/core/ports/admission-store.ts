/**
 * What admission needs from persistence: find a workload by its Idempotency-Key, and create
 * one. Creating answers a union instead of throwing when another request took the key
 * between the lookup and the insert (the race the unique index settles), so the rule that
 * decides "replay or conflict" lives in the core, not in a match on the database's error
 * text. Implemented by adapters/store-sqlite/stores/admission-store.ts.
 */

import type { Dependency } from "../dependencies.ts";
import type {
  Allocation,
  SubmissionToken,
  Workload,
  WorkloadKind,
  WorkloadSpec,
} from "../models.ts";
import type { LimitExceeded, PrincipalUsage } from "../principals.ts";

/** A new attempt's identity: its allocation id and its submission token. */
export interface AttemptIds {
  readonly allocationId: string;
  readonly token: SubmissionToken;
}

/**
 * The workload's first attempt, minted in the transaction that creates it: its token is
 * durable the moment the workload is (INV-8), so the attempt can be handed to the backend
 * at once instead of after a second commit in the next reconciler pass.
 */
export interface FirstAttemptInput extends AttemptIds {
  /** The attempt's event message ("attempt 1 of N"). */
  readonly message: string;
}

export interface CreateWorkloadInput {
  readonly id: string;
  readonly kind: WorkloadKind;
  readonly name: string;
  readonly profile: string;
  readonly spec: WorkloadSpec;
  readonly maxAttempts: number;
  readonly idempotencyKey: string | null;
  readonly requestHash: string | null;
  /** Absent: the workload is created PENDING and the reconciler mints its first attempt. */
  readonly firstAttempt?: FirstAttemptInput;
  /** The principal that submits it; absent or null: the admin. */
  readonly owner?: string | null;
  /** What its profile holds while live, summed against the owner's limits. */
  readonly cpus?: number;
  readonly gpus?: number;
  /**
   * The owner's limit rule, run inside the inserting transaction over the owner's live
   * usage: a refusal there writes nothing. Absent: no limit (the admin).
   */
  readonly withinLimits?: (usage: PrincipalUsage) => LimitExceeded | null;
  /** Created held (AWAITING_RELEASE) until released; never with `firstAttempt`. */
  readonly held?: boolean;
  /** The workloads it runs after; never with `firstAttempt`. */
  readonly after?: readonly Dependency[];
}

/** A workload found by its Idempotency-Key, with the hash of the request that created it. */
export interface IdempotentMatch {
  readonly workload: Workload;
  readonly requestHash: string | null;
}

export type CreateWorkloadResult =
  | {
      readonly kind: "Created";
      readonly workload: Workload;
      /** The first attempt, when one was asked for (SUBMITTING, no handle yet). */
      readonly attempt: Allocation | null;
    }
  /** Another request by the same owner created a workload with this key first; nothing written. */
  | { readonly kind: "KeyTaken"; readonly existing: IdempotentMatch }
  /** The owner is at one of its limits; nothing written. */
  | { readonly kind: "OverLimit"; readonly exceeded: LimitExceeded };

export interface AdmissionStore {
  /** The owner's own workload with this key (null owner: the admin's); keys are per owner. */
  findByIdempotencyKey(owner: string | null, key: string): IdempotentMatch | null;
  /** The owner (null: the admin) of each of these workloads that exists. */
  ownersOf(ids: readonly string[]): ReadonlyMap<string, string | null>;
  /**
   * Inserts the workload and its first event in one transaction, with its first attempt when
   * asked (then SUBMITTING, else PENDING). Writes; answered once the write is durable (the
   * SQLite adapter commits the submissions of one moment together).
   */
  create(input: CreateWorkloadInput): CreateWorkloadResult | Promise<CreateWorkloadResult>;
}
