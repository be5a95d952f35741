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
import type { ListWorkloadsQuery, StoreDeps } from "../../../adapters/store-sqlite/index.ts";
import {
  latestWorkloadChangeEver,
  listWorkloadIds,
  oldestWorkloadChange,
  readWorkloadChanges,
  readWorkloadDetailsByIds,
  type UnreadableWorkload,
  type WorkloadDetails,
} from "../../../adapters/store-sqlite/index.ts";
import { ADMIN, type Caller } from "../../../core/principals.ts";
import { workloadFor } from "../../../core/scheduler-words.ts";
import type { Log } from "../../../lib/log.ts";
import {
  type ConfirmationSource,
  confirmationSource,
  iso,
  NEVER_CONFIRMED,
  type PhaseConfirmedAt,
  phaseConfirmedAtMs,
  stableWorkloadView,
  timeRemainingSeconds,
  workloadDeadlineMs,
  workloadView,
} from "../views.ts";

export interface WorkloadJsonPage {
  /** Each item's JSON text, newest first. */
  readonly items: readonly string[];
  readonly next: { readonly createdAt: number; readonly id: string } | null;
}

export interface WorkloadViewCache {
  /** `caller` picks the message's form (core/scheduler-words.ts); absent: the hidden one. */
  list(query: ListWorkloadsQuery, caller?: Caller): WorkloadJsonPage;
  /** Null: no such workload. */
  show(id: string, caller?: Caller): string | null;
  /** Entries held now (for tests and metrics). */
  size(): number;
}

export interface WorkloadViewCacheOptions {
  /** Oldest entries are dropped beyond this many (about a kilobyte each). */
  readonly maxEntries?: number;
  /** The reconciler's confirmations (`phaseConfirmedAt`); default: none heard. */
  readonly confirmed?: PhaseConfirmedAt;
  /** Where an unreadable row is reported (once per workload); default: nowhere. */
  readonly log?: Log;
}

/**
 * The item shown for a workload whose stored row does not parse: its id and why, so a list
 * still answers and the admin can find the row; never a guess at its other fields.
 */
function unreadableJson(u: UnreadableWorkload): string {
  return JSON.stringify({
    id: u.id,
    unreadable: true,
    message: `this workload's stored record cannot be read: ${u.message}`,
  });
}

export function serializeWorkload(
  d: WorkloadDetails,
  nowMs: number,
  confirmed: PhaseConfirmedAt = NEVER_CONFIRMED,
  caller?: Caller,
): string {
  const workload = caller === undefined ? d.workload : workloadFor(caller, d.workload);
  return JSON.stringify(workloadView(workload, d.conditions, d.allocations, nowMs, confirmed));
}

/**
 * What an entry holds: the view's JSON without the two fields that change with no store
 * write (`phaseConfirmedAt`, with each observation; `timeRemainingSeconds`, with the clock),
 * and what they are computed from. A cached text that held them would answer a stale
 * TIME_REMAINING, or a stale confirmation, until the workload next changed.
 */
interface Held {
  /** The view with `message` in the hidden form: a principal's. */
  readonly stableJson: string;
  /** The admin's, with the scheduler's own words; the same text when there are none. */
  readonly adminJson: string;
  readonly deadlineMs: number | null;
  readonly confirmation: ConfirmationSource;
}

function hold(d: WorkloadDetails): Held {
  const stableJson = JSON.stringify(stableWorkloadView(d.workload, d.conditions, d.allocations));
  return {
    stableJson,
    adminJson:
      d.workload.messageAdmin == null
        ? stableJson
        : JSON.stringify(
            stableWorkloadView(workloadFor(ADMIN, d.workload), d.conditions, d.allocations),
          ),
    deadlineMs: workloadDeadlineMs(d.workload, d.allocations),
    confirmation: confirmationSource(d.workload, d.allocations),
  };
}

/** The text `serializeWorkload` gives: the two fields are the view's last, so they close it. */
function render(
  held: Held,
  nowMs: number,
  confirmed: PhaseConfirmedAt,
  caller: Caller | undefined,
): string {
  const json = caller?.kind === "Admin" ? held.adminJson : held.stableJson;
  const remaining = timeRemainingSeconds(held.deadlineMs, nowMs);
  const confirmedMs = phaseConfirmedAtMs(held.confirmation, confirmed);
  const at = confirmedMs === null ? "null" : `"${iso(confirmedMs)}"`;
  return `${json.slice(0, -1)},"phaseConfirmedAt":${at},"timeRemainingSeconds":${remaining === null ? "null" : remaining}}`;
}

export function createWorkloadViewCache(
  store: StoreDeps,
  options: WorkloadViewCacheOptions = {},
): WorkloadViewCache {
  const maxEntries = Math.max(1, options.maxEntries ?? 20_000);
  const confirmed = options.confirmed ?? NEVER_CONFIRMED;
  const entries = new Map<string, Held>();
  let seenSeq = 0;
  const reported = new Set<string>();

  /** Each unreadable workload logged once per process, however often it is listed. */
  function report(u: UnreadableWorkload): string {
    if (!reported.has(u.id)) {
      reported.add(u.id);
      options.log?.error("a stored workload cannot be read; it is listed as unreadable", {
        workloadId: u.id,
        error: u.message,
      });
    }
    return unreadableJson(u);
  }

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

  function put(id: string, held: Held): void {
    entries.set(id, held);
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
    list(query, caller) {
      return inSnapshot(() => {
        const page = listWorkloadIds(store, query);
        const missing = page.ids.filter((id) => !entries.has(id));
        const fresh = new Map<string, Held>();
        const read = readWorkloadDetailsByIds(store, missing);
        for (const d of read.details) {
          const held = hold(d);
          fresh.set(d.workload.id, held);
          put(d.workload.id, held);
        }
        const unreadable = new Map(read.unreadable.map((u) => [u.id, report(u)]));
        const nowMs = store.clock.now();
        const items = page.ids.map((id) => {
          const shownUnreadable = unreadable.get(id);
          if (shownUnreadable !== undefined) return shownUnreadable;
          const held = fresh.get(id) ?? entries.get(id);
          // Same snapshot as the page: a listed id always has its row.
          if (held === undefined) throw new Error(`listed workload ${id} has no row`);
          return render(held, nowMs, confirmed, caller);
        });
        return { items, next: page.next };
      });
    },
    show(id, caller) {
      // Held, and nothing changed since the last sync: one statement (its own snapshot)
      // proves the entry current, without opening a transaction.
      const held = entries.get(id);
      if (held !== undefined && latestWorkloadChangeEver(store) === seenSeq) {
        return render(held, store.clock.now(), confirmed, caller);
      }
      return inSnapshot(() => {
        const cached = entries.get(id);
        if (cached !== undefined) return render(cached, store.clock.now(), confirmed, caller);
        const read = readWorkloadDetailsByIds(store, [id]);
        const u = read.unreadable[0];
        if (u !== undefined) return report(u);
        const d = read.details[0];
        if (d === undefined) return null;
        const fresh = hold(d);
        put(id, fresh);
        return render(fresh, store.clock.now(), confirmed, caller);
      });
    },
    size: () => entries.size,
  };
}
