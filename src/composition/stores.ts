/**
 * The store's adapters, bound once: every port the core and the API reach the database
 * through, built here from one opened store so no other room binds an adapter itself.
 */
import type { SubmissionToken } from "../orchestration/models.ts";
import type { ActivityRecorder } from "../orchestration/ports/activity-recorder.ts";
import type { AdmissionStore } from "../orchestration/ports/admission-store.ts";
import type { IsolationVerdictStore } from "../orchestration/ports/isolation-verdict-store.ts";
import type { NonceBurner } from "../orchestration/ports/nonce-burner.ts";
import type { ReclaimerStore } from "../orchestration/ports/reclaimer-store.ts";
import type { ReconcilerStore } from "../orchestration/ports/reconciler-store.ts";
import type { SessionStore } from "../orchestration/ports/session-store.ts";
import { bindActivityRecorder } from "../store/adapters/activity-recorder.ts";
import { bindAdmissionStore } from "../store/adapters/admission-store.ts";
import { bindIsolationVerdictStore } from "../store/adapters/isolation-verdict-store.ts";
import { bindNonceBurner } from "../store/adapters/nonce-burner.ts";
import { bindReclaimerStore } from "../store/adapters/reclaimer-store.ts";
import { bindReconcilerStore } from "../store/adapters/reconciler-store.ts";
import { bindSessionStore } from "../store/adapters/session-store.ts";
import type { StoreDeps } from "../store/deps.ts";
import { findAllocationsByTokens, listUnsandboxedLiveAllocations } from "../store/index.ts";

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
