/**
 * The store's adapters, bound once: every port the core and the API reach the database
 * through, built here from one opened store so no other room binds an adapter itself.
 */

import type { StoreDeps } from "../../../adapters/store-sqlite/deps.ts";
import {
  findAllocationsByTokens,
  listUnsandboxedLiveAllocations,
} from "../../../adapters/store-sqlite/index.ts";
import { bindActivityRecorder } from "../../../adapters/store-sqlite/stores/activity-recorder.ts";
import { bindAdmissionStore } from "../../../adapters/store-sqlite/stores/admission-store.ts";
import { bindIsolationVerdictStore } from "../../../adapters/store-sqlite/stores/isolation-verdict-store.ts";
import { bindNonceBurner } from "../../../adapters/store-sqlite/stores/nonce-burner.ts";
import { bindReclaimerStore } from "../../../adapters/store-sqlite/stores/reclaimer-store.ts";
import { bindReconcilerStore } from "../../../adapters/store-sqlite/stores/reconciler-store.ts";
import { bindSessionStore } from "../../../adapters/store-sqlite/stores/session-store.ts";
import type { SubmissionToken } from "../../../core/models.ts";
import type { ActivityRecorder } from "../../../core/ports/activity-recorder.ts";
import type { AdmissionStore } from "../../../core/ports/admission-store.ts";
import type { IsolationVerdictStore } from "../../../core/ports/isolation-verdict-store.ts";
import type { NonceBurner } from "../../../core/ports/nonce-burner.ts";
import type { ReclaimerStore } from "../../../core/ports/reclaimer-store.ts";
import type { ReconcilerStore } from "../../../core/ports/reconciler-store.ts";
import type { SessionStore } from "../../../core/ports/session-store.ts";

export interface BoundStores {
  readonly reconciler: ReconcilerStore;
  readonly admission: AdmissionStore;
  readonly sessions: SessionStore;
  readonly nonces: NonceBurner;
  readonly leases: ReclaimerStore;
  readonly activity: ActivityRecorder;
  /** The tokens among these that have an allocation row (the orphan sweep's one query). */
  knownTokens(tokens: readonly SubmissionToken[]): ReadonlySet<string>;
  /** Live allocations started outside the verified sandbox (the SESSION guard). */
  unsandboxedLive(limit: number): readonly string[];
  readonly isolationVerdicts: IsolationVerdictStore;
}

/** One adapter per port over the same store; binding is cheap (no query runs here). */
export function bindStores(store: StoreDeps): BoundStores {
  return {
    reconciler: bindReconcilerStore(store),
    admission: bindAdmissionStore(store),
    sessions: bindSessionStore(store),
    nonces: bindNonceBurner(store),
    leases: bindReclaimerStore(store),
    activity: bindActivityRecorder(store),
    knownTokens: (tokens) =>
      new Set(findAllocationsByTokens(store, tokens).map((r) => r.allocation.token)),
    unsandboxedLive: (limit) => listUnsandboxedLiveAllocations(store, limit),
    isolationVerdicts: bindIsolationVerdictStore(store),
  };
}
