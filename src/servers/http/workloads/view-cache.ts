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
  type WorkloadIdPage,
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

/** UTF-8 JSON text as a response body takes it. */
export type JsonBytes = Uint8Array<ArrayBuffer>;

/** As `WorkloadJsonPage`, each item its UTF-8 bytes: what the routes send. */
export interface WorkloadBytesPage {
  readonly items: readonly JsonBytes[];
  readonly next: { readonly createdAt: number; readonly id: string } | null;
}

export interface WorkloadViewCache {
  /** `caller` picks the message's form (core/scheduler-words.ts); absent: the hidden one. */
  list(query: ListWorkloadsQuery, caller?: Caller): WorkloadJsonPage;
  /** Null: no such workload. */
  show(id: string, caller?: Caller): string | null;
  /** The page as bytes (`list`'s items encoded), for the response body. */
  listBytes(query: ListWorkloadsQuery, caller?: Caller): WorkloadBytesPage;
  /** `show` as bytes. */
  showBytes(id: string, caller?: Caller): JsonBytes | null;
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
 * What an entry holds. Live: the view's JSON without the two fields that change with no
 * store write (`phaseConfirmedAt`, with each observation; `timeRemainingSeconds`, with the
 * clock), and what they are computed from; a cached text that held them would answer a
 * stale TIME_REMAINING, or a stale confirmation, until the workload next changed. Fixed:
 * neither can change without a write (no deadline, and the confirmation is the row's own
 * `updatedAt`: every ended workload, most of a large store), so the whole answer is held as
 * the bytes sent. Building 100 texts per page (a date format and a string each) and encoding
 * the joined 100 KB again on every request was two thirds of the list's own time (issue 34's
 * reads profile); a page of fixed entries is now a copy of their bytes.
 */
type Held =
  | {
      readonly kind: "Fixed";
      /** A principal's answer: `message` in the hidden form. */
      readonly bytes: JsonBytes;
      /** The admin's, with the scheduler's own words; the same buffer when there are none. */
      readonly adminBytes: JsonBytes;
    }
  | {
      readonly kind: "Live";
      readonly stableJson: string;
      readonly adminJson: string;
      readonly deadlineMs: number | null;
      readonly confirmation: ConfirmationSource;
    };

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

function hold(d: WorkloadDetails): Held {
  const stableJson = JSON.stringify(stableWorkloadView(d.workload, d.conditions, d.allocations));
  const adminJson =
    d.workload.messageAdmin == null
      ? stableJson
      : JSON.stringify(
          stableWorkloadView(workloadFor(ADMIN, d.workload), d.conditions, d.allocations),
        );
  const deadlineMs = workloadDeadlineMs(d.workload, d.allocations);
  const confirmation = confirmationSource(d.workload, d.allocations);
  const live = { kind: "Live", stableJson, adminJson, deadlineMs, confirmation } as const;
  if (deadlineMs !== null || confirmation.kind !== "Written") return live;
  // Neither the clock nor the confirmations are read for this entry: any values will do.
  const bytes = utf8.encode(renderLive(live, 0, NEVER_CONFIRMED, undefined));
  const adminBytes =
    adminJson === stableJson ? bytes : utf8.encode(renderLive(live, 0, NEVER_CONFIRMED, ADMIN));
  return { kind: "Fixed", bytes, adminBytes };
}

/** The text `serializeWorkload` gives: the two fields are the view's last, so they close it. */
function renderLive(
  held: Extract<Held, { kind: "Live" }>,
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

function render(
  held: Held,
  nowMs: number,
  confirmed: PhaseConfirmedAt,
  caller: Caller | undefined,
): JsonBytes {
  if (held.kind === "Fixed") return caller?.kind === "Admin" ? held.adminBytes : held.bytes;
  return utf8.encode(renderLive(held, nowMs, confirmed, caller));
}

const COMMA = 0x2c;

/** Page id lists kept between changes (each at most `listLimitMax` ids). */
const MAX_PAGES = 256;

/** One key per distinct list query: every field that picks or orders the page's rows. */
function pageKey(q: ListWorkloadsQuery): string {
  return JSON.stringify([
    q.owner ?? null,
    q.kind ?? null,
    q.phase ?? null,
    q.backendJobId ?? null,
    q.limit,
    q.cursor?.createdAt ?? null,
    q.cursor?.id ?? null,
  ]);
}

/**
 * `${head}${items joined by ","}${tail}` as one buffer: the list's body, copied from the held
 * bytes rather than built as text and encoded again.
 */
export function joinJsonBytes(head: string, items: readonly JsonBytes[], tail: string): JsonBytes {
  const h = utf8.encode(head);
  const t = utf8.encode(tail);
  let size = h.length + t.length + Math.max(0, items.length - 1);
  for (const item of items) size += item.length;
  const out = new Uint8Array(size);
  out.set(h, 0);
  let at = h.length;
  items.forEach((item, i) => {
    if (i > 0) out[at++] = COMMA;
    out.set(item, at);
    at += item.length;
  });
  out.set(t, at);
  return out;
}

export function createWorkloadViewCache(
  store: StoreDeps,
  options: WorkloadViewCacheOptions = {},
): WorkloadViewCache {
  const maxEntries = Math.max(1, options.maxEntries ?? 20_000);
  const confirmed = options.confirmed ?? NEVER_CONFIRMED;
  const entries = new Map<string, Held>();
  /**
   * The ids of pages served since the last change (by the query's key): with no commit since,
   * the same query names the same workloads, so a repeated page is proven current by the one
   * statement `show` runs rather than read again in a transaction of three (the list's
   * statements were half its remaining time at 10,000 workloads, issue 34). Any change drops
   * them all: a write anywhere may move a row into or out of any page.
   */
  const pages = new Map<string, WorkloadIdPage>();
  let seenSeq = 0;
  const reported = new Set<string>();

  /** Each unreadable workload logged once per process, however often it is listed. */
  function report(u: UnreadableWorkload): JsonBytes {
    if (!reported.has(u.id)) {
      reported.add(u.id);
      options.log?.error("a stored workload cannot be read; it is listed as unreadable", {
        workloadId: u.id,
        error: u.message,
      });
    }
    return utf8.encode(unreadableJson(u));
  }

  /** Evicts what changed since the last call. Inside the request's read transaction. */
  function sync(): void {
    const latest = latestWorkloadChangeEver(store);
    if (latest === seenSeq) return;
    pages.clear();
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

  /** Every item of a page whose entries are all held, or null (one was dropped). */
  function fromHeld(ids: readonly string[], caller: Caller | undefined): JsonBytes[] | null {
    const nowMs = store.clock.now();
    const items: JsonBytes[] = [];
    for (const id of ids) {
      const held = entries.get(id);
      if (held === undefined) return null;
      items.push(render(held, nowMs, confirmed, caller));
    }
    return items;
  }

  function listBytes(query: ListWorkloadsQuery, caller?: Caller): WorkloadBytesPage {
    const key = pageKey(query);
    const known = pages.get(key);
    // No commit since the page was read: its ids, and every entry held, are current.
    if (known !== undefined && latestWorkloadChangeEver(store) === seenSeq) {
      const items = fromHeld(known.ids, caller);
      if (items !== null) return { items, next: known.next };
    }
    return inSnapshot(() => {
      const page = listWorkloadIds(store, query);
      pages.delete(key);
      pages.set(key, page);
      if (pages.size > MAX_PAGES) {
        const oldest = pages.keys().next();
        if (!oldest.done) pages.delete(oldest.value);
      }
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
  }

  function showBytes(id: string, caller?: Caller): JsonBytes | null {
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
  }

  return {
    listBytes,
    showBytes,
    list(query, caller) {
      const page = listBytes(query, caller);
      return { items: page.items.map((b) => fromUtf8.decode(b)), next: page.next };
    },
    show(id, caller) {
      const bytes = showBytes(id, caller);
      return bytes === null ? null : fromUtf8.decode(bytes);
    },
    size: () => entries.size,
  };
}
