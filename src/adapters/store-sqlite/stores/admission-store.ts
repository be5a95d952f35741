/** The SQLite adapter of admission's port (core/ports/admission-store.ts). */
import type { AdmissionStore } from "../../../core/ports/admission-store.ts";
import type { StoreDeps } from "../deps.ts";
import { createWorkload } from "../ops/create-workload.ts";
import { findWorkloadByIdempotencyKey } from "../ops/find-workload-by-idempotency-key.ts";

export function bindAdmissionStore(deps: StoreDeps): AdmissionStore {
  return {
    findByIdempotencyKey: (owner, key) => findWorkloadByIdempotencyKey(deps, owner, key),
    create: (input) => createWorkload(deps, input),
  };
}
