/** The SQLite adapter of the lease reclaimer's port (core/ports/reclaimer-store.ts). */
import type { ReclaimerStore } from "../../../core/ports/reclaimer-store.ts";
import type { StoreDeps } from "../deps.ts";
import { listAllocations } from "../ops/list-allocations.ts";
import { loadReconcileSnapshot } from "../ops/load-reconcile-snapshot.ts";
import { requestStop } from "../ops/request-stop.ts";

export function bindReclaimerStore(deps: StoreDeps): ReclaimerStore {
  return {
    loadLiveView: () => loadReconcileSnapshot(deps),
    listAllocations: (workloadId) => listAllocations(deps, workloadId),
    requestStop: (workloadId, reason, message) => requestStop(deps, workloadId, reason, message),
  };
}
