/**
 * Changes since a cursor: the same one squeue per tick, diffed against the last parse, and
 * only the jobs whose rows moved (or that have no steady answer yet) read again.
 */
import { type ChangeFeed, createChangeFeed } from "../../core/change-feed.ts";
import type {
  ObservationCursor,
  ObservationTarget,
  ObserveChangesResult,
} from "../../core/ports/allocation-backend.ts";
import { observeListed } from "./observe.ts";
import { createSqueueMemo, type QueueRow } from "./parse-squeue.ts";
import type { SlurmContext } from "./slurm-context.ts";

/** What the change feed keeps between ticks. */
export interface FeedState {
  readonly feed: ChangeFeed;
  /** Lines of the last listing the feed read, so an unchanged line is not parsed again. */
  readonly memo: ReturnType<typeof createSqueueMemo>;
  /** The last listing the feed read, by job id. */
  readonly listed: Map<string, QueueRow>;
  names: { readonly membership: number; readonly list: readonly string[] } | null;
  /** The rows `listed` was last made from, in the listing's order. */
  listedRows: readonly QueueRow[];
  /** The element rows of each job array in `listed`, by the array's job id. */
  readonly listedElements: Map<string, Map<string, QueueRow>>;
}

export function createFeedState(instance: string): FeedState {
  return {
    feed: createChangeFeed(instance),
    memo: createSqueueMemo(),
    listed: new Map<string, QueueRow>(),
    names: null,
    listedRows: [],
    listedElements: new Map<string, Map<string, QueueRow>>(),
  };
}

/**
 * A listing row's key: a single job's id, or its array's id and the element (or, for a row of
 * pending elements, the first of its range: ranges never overlap). Elements of one array share
 * the job id, and keyed by it alone they overwrote one another in the change feed.
 */
function listingKey(row: QueueRow): string {
  const task = row.arrayTask;
  if (task === undefined) return row.jobId;
  return task.kind === "Element"
    ? `${row.jobId}_${task.index}`
    : `${row.jobId}_p${task.indices[0] ?? ""}`;
}

/**
 * The job names to list, rebuilt only when the watch set's membership changed: the same
 * array (so the broker validates it once) for as long as the same jobs are watched.
 */
function namesOf(
  state: FeedState,
  membership: number,
  watched: ReadonlyMap<string, { readonly target: ObservationTarget }>,
): readonly string[] {
  if (state.names?.membership === membership) return state.names.list;
  const tokens = new Set<string>();
  for (const { target } of watched.values()) tokens.add(target.token);
  state.names = { membership, list: [...tokens] };
  return state.names.list;
}

function keep(state: FeedState, key: string, row: QueueRow): void {
  state.listed.set(key, row);
  if (row.arrayTask === undefined) return;
  const rows = state.listedElements.get(row.jobId) ?? new Map<string, QueueRow>();
  state.listedElements.set(row.jobId, rows);
  rows.set(key, row);
}

function forget(state: FeedState, key: string, row: QueueRow): void {
  state.listed.delete(key);
  const rows = state.listedElements.get(row.jobId);
  if (rows === undefined) return;
  rows.delete(key);
  if (rows.size === 0) state.listedElements.delete(row.jobId);
}

/**
 * Takes a new listing in: `listed` becomes it, and the job ids whose row is new, changed
 * or gone are returned (an array's id when one of its element rows moved). A row printed as
 * last time is the memo's same object, so the steady case costs one comparison per row (the
 * same place as last time) and no parse; a listing the memo patched in place from the last
 * one (a few rows changed where they were) costs only the rows it patched.
 */
function relist(state: FeedState, rows: readonly QueueRow[]): string[] {
  const previous = state.listedRows;
  state.listedRows = rows;
  if (rows === previous) return [];
  const moved: string[] = [];
  const patch = state.memo.patched;
  const only = patch?.from === previous && patch.to === rows ? patch.indices : null;
  let present = only === null ? 0 : rows.length - only.length;
  const changed: QueueRow[] = [];
  const look = (i: number) => {
    const row = rows[i] as QueueRow;
    if (previous[i] === row) {
      present += 1;
      return;
    }
    const old = state.listed.get(listingKey(row));
    if (old !== undefined) present += 1;
    if (old !== row) changed.push(row);
  };
  if (only === null) for (let i = 0; i < rows.length; i++) look(i);
  else for (const i of only) look(i);
  if (present < state.listed.size) {
    const now = new Set(rows.map(listingKey));
    for (const [key, row] of state.listed) {
      if (now.has(key)) continue;
      forget(state, key, row);
      moved.push(row.jobId);
    }
  }
  for (const row of changed) {
    keep(state, listingKey(row), row);
    moved.push(row.jobId);
  }
  return moved;
}

export async function observeChanges(
  ctx: SlurmContext,
  state: FeedState,
  cursor: ObservationCursor | null,
  targets: readonly ObservationTarget[],
): Promise<ObserveChangesResult> {
  const opening = state.feed.open(cursor, targets);
  if (opening.kind === "CursorExpired") return opening;
  const { watched } = opening;
  for (const id of ctx.absences.keys()) if (!watched.has(id)) ctx.absences.delete(id);
  if (watched.size === 0) return state.feed.answer(opening, targets, new Map());
  const queue = await ctx.broker.listQueue(namesOf(state, opening.membership, watched), state.memo);
  if (queue.kind === "Failed") {
    ctx.noteFailure(queue.error);
    return { kind: "Unavailable", message: queue.error.message };
  }
  ctx.noteSuccess("squeue");
  // Read again: the targets, every watched job whose row moved, and every watched job
  // without a steady answer yet (one waiting on accounting counts its absences each time,
  // as a full observe would).
  const reread = new Map<string, ObservationTarget>();
  for (const t of targets) reread.set(t.allocationId, t);
  for (const jobId of relist(state, queue.value)) {
    const id = state.feed.byHandle(jobId);
    const entry = id === undefined ? undefined : watched.get(id);
    if (entry !== undefined) reread.set(entry.target.allocationId, entry.target);
  }
  for (const id of state.feed.unsettled()) {
    const entry = watched.get(id);
    if (entry !== undefined) reread.set(id, entry.target);
  }
  const result = await observeListed(ctx, [...reread.values()], state.listed, (handle) => [
    ...(state.listedElements.get(handle)?.values() ?? []),
  ]);
  if (result.kind === "Unavailable") return result;
  return state.feed.answer(opening, targets, result.observations);
}
