/**
 * Serialized workload views (the JSON of `GET /v1/workloads` items and of
 * `GET /v1/workloads/{id}`), kept per workload and dropped when the store says that
 * workload changed. The failure it replaces: every list request decoded, re-viewed and
 * re-serialized 100 workloads with their allocations (about 1.2 ms of one core), so the
 * route topped out near 700 requests/s at 10,000 workloads.
 *
 * The store stays the source of truth. What changed comes from `workload_changes`, which
 * triggers fill on every insert, update or delete of a workload, allocation or condition,
 * whichever code path or connection wrote. Each request runs in one read transaction:
 * it first evicts every workload changed since the last request, then reads its page, so a
 * cached entry and the page it is served in are the same snapshot. When the log was pruned
 * past the last position seen (its reader, the reconciler's live view, deletes what it
 * consumed), the changes in between are unknown and the whole cache is dropped.
 */
import type { ListWorkloadsQuery, StoreDeps } from "../../store/index.ts";
import {
  getWorkloadDetails,
  getWorkloadDetailsByIds,
  latestWorkloadChangeEver,
  listWorkloadIds,
  oldestWorkloadChange,
  readWorkloadChanges,
  type WorkloadDetails,
} from "../../store/index.ts";
import { workloadView } from "../views.ts";

export interface WorkloadJsonPage {
  /** Each item's JSON text, newest first. */
  readonly items: readonly string[];
  readonly next: { readonly createdAt: number; readonly id: string } | null;
}

export interface WorkloadViewCache {
  list(query: ListWorkloadsQuery): WorkloadJsonPage;
  /** Null: no such workload. */
  show(id: string): string | null;
  /** Entries held now (for tests and metrics). */
  size(): number;
}

export interface WorkloadViewCacheOptions {
  /** Oldest entries are dropped beyond this many (about a kilobyte each). */
  readonly maxEntries?: number;
}

export function serializeWorkload(d: WorkloadDetails): string {
  return JSON.stringify(workloadView(d.workload, d.conditions, d.allocations));
}

export function createWorkloadViewCache(
  store: StoreDeps,
  options: WorkloadViewCacheOptions = {},
): WorkloadViewCache {
  const maxEntries = Math.max(1, options.maxEntries ?? 20_000);
  const entries = new Map<string, string>();
  let seenSeq = 0;

  /** Evicts what changed since the last call. Inside the request's read transaction. */
  function sync(): void {
    const latest = latestWorkloadChangeEver(store);
    if (latest === seenSeq) return;
    const oldest = oldestWorkloadChange(store);
    if (latest < seenSeq || oldest === null || oldest > seenSeq + 1) {
      // Pruned past us (or a store that went back): what changed in between is unknown.
      entries.clear();
    } else {
      for (const id of readWorkloadChanges(store, seenSeq).workloadIds) entries.delete(id);
    }
    seenSeq = latest;
  }

  function put(id: string, json: string): void {
    entries.set(id, json);
    if (entries.size > maxEntries) {
      const oldest = entries.keys().next();
      if (!oldest.done) entries.delete(oldest.value);
    }
  }

  function inSnapshot<T>(read: () => T): T {
    return store.db.$client.transaction(() => {
      sync();
      return read();
    })();
  }

  return {
    list(query) {
      return inSnapshot(() => {
        const page = listWorkloadIds(store, query);
        const missing = page.ids.filter((id) => !entries.has(id));
        const fresh = new Map<string, string>();
        for (const d of getWorkloadDetailsByIds(store, missing)) {
          const json = serializeWorkload(d);
          fresh.set(d.workload.id, json);
          put(d.workload.id, json);
        }
        const items = page.ids.map((id) => {
          const json = fresh.get(id) ?? entries.get(id);
          // Same snapshot as the page: a listed id always has its row.
          if (json === undefined) throw new Error(`listed workload ${id} has no row`);
          return json;
        });
        return { items, next: page.next };
      });
    },
    show(id) {
      // Held, and nothing changed since the last sync: one statement (its own snapshot)
      // proves the entry current, without opening a transaction.
      const held = entries.get(id);
      if (held !== undefined && latestWorkloadChangeEver(store) === seenSeq) return held;
      return inSnapshot(() => {
        const cached = entries.get(id);
        if (cached !== undefined) return cached;
        const d = getWorkloadDetails(store, id);
        if (d === null) return null;
        const json = serializeWorkload(d);
        put(id, json);
        return json;
      });
    },
    size: () => entries.size,
  };
}
