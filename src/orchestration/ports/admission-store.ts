/**
 * What admission needs from persistence: find a workload by its Idempotency-Key, and create
 * one. Creating answers a union instead of throwing when another request took the key
 * between the lookup and the insert (the race the unique index settles), so the rule that
 * decides "replay or conflict" lives in the core, not in a match on the database's error
 * text. Implemented by store/adapters/admission-store.ts.
 */
import type { Workload, WorkloadKind, WorkloadSpec } from "../models.ts";

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

/** A workload found by its Idempotency-Key, with the hash of the request that created it. */
export interface IdempotentMatch {
  readonly workload: Workload;
  readonly requestHash: string | null;
}

export type CreateWorkloadResult =
  | { readonly kind: "Created"; readonly workload: Workload }
  /** Another request created a workload with this Idempotency-Key first; nothing written. */
  | { readonly kind: "KeyTaken"; readonly existing: IdempotentMatch };

export interface AdmissionStore {
  findByIdempotencyKey(key: string): IdempotentMatch | null;
  /** Inserts a PENDING workload and its first event in one transaction. Writes. */
  create(input: CreateWorkloadInput): CreateWorkloadResult;
}
