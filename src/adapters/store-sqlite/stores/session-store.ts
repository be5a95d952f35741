/** The SQLite adapter of the core's session store port (core/ports/session-store.ts). */
import type { SessionStore } from "../../../core/ports/session-store.ts";
import type { StoreDeps } from "../deps.ts";
import { listConditions, setCondition } from "../ops/conditions.ts";
import { getAllocation } from "../ops/get-allocation.ts";
import { getWorkload } from "../ops/get-workload.ts";
import { listAllocations } from "../ops/list-allocations.ts";
import { listEndedSessionsWithOpenConditions } from "../ops/list-ended-sessions-with-open-conditions.ts";
import { listWorkloads } from "../ops/list-workloads.ts";
import { loadReconcileSnapshot } from "../ops/load-reconcile-snapshot.ts";

export function bindSessionStore(deps: StoreDeps): SessionStore {
  return {
    getWorkload: (workloadId) => getWorkload(deps, workloadId),
    getAllocation: (allocationId) => getAllocation(deps, allocationId),
    listAllocations: (workloadId) => listAllocations(deps, workloadId),
    listConditions: (workloadId) => listConditions(deps, workloadId),
    setCondition: (workloadId, update) => setCondition(deps, workloadId, update),
    listEndedSessionsWithOpenConditions: () => listEndedSessionsWithOpenConditions(deps),
    loadLiveView: () => loadReconcileSnapshot(deps),
    listSessions: (page) => listWorkloads(deps, { kind: "SESSION", ...page }),
  };
}
