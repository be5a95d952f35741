/**
 * A change feed for a backend whose resource plane can only list everything (a queue listing
 * has no "since"): the backend lists what it watches, and the feed diffs the observations it
 * built against the last ones it returned, so the caller hears only what changed. The
 * failure it replaces: the reconciler's focused tick was only for the simulated backend,
 * while the cluster and local backends answered with every observation every tick (8.7 ms
 * median at 10,000 live workloads, 11-16 ms under load, against 2.8 ms with changes only).
 *
 * What is watched: every target of the call that started the feed (a full look, cursor null)
 * and every target since. An entry leaves when it was seen terminal (that answer was given)
 * or when the feed starts again. A cursor is only good for the very next call of this feed
 * (the diff base is the last answer, nothing older) and never across a restart: the
 * instance part differs, so any other cursor is expired and the caller looks at everything.
 *
 * Pure bookkeeping: the backend does the listing and builds the observations.
 */
import { isTerminal } from "./models.ts";
import type {
  AllocationObservation,
  ObservationCursor,
  ObservationTarget,
  ObserveChangesResult,
  ObservedChange,
} from "./ports/allocation-backend.ts";

export interface WatchedAllocation {
  readonly target: ObservationTarget;
  /** What the feed last returned for it; undefined before its first answer. */
  readonly last: AllocationObservation | undefined;
}

export type FeedOpening =
  | { readonly kind: "CursorExpired" }
  | {
      readonly kind: "Open";
      /** Null: the call starts the feed (it reports no changes). */
      readonly cursor: ObservationCursor | null;
      /** Everything watched, targets included. */
      readonly watched: ReadonlyMap<string, WatchedAllocation>;
      /**
       * Changes whenever an allocation joins or leaves the watch set (or a target's handle
       * or token changes): what a backend may key a cache of the watched names on.
       */
      readonly membership: number;
    };

export interface ChangeFeed {
  /** Checks the cursor and takes the targets in; nothing is answered yet. */
  open(cursor: ObservationCursor | null, targets: readonly ObservationTarget[]): FeedOpening;
  /**
   * The answer for an opened call. `observations` holds every target and any watched
   * allocation the backend re-read; one it did not re-read is unchanged by its own account
   * (the same listing row as last time). Advances the cursor.
   */
  answer(
    opening: Extract<FeedOpening, { kind: "Open" }>,
    targets: readonly ObservationTarget[],
    observations: ReadonlyMap<string, AllocationObservation>,
  ): ObserveChangesResult;
  /** The watched allocation for a backend handle, if any. */
  byHandle(handle: string): string | undefined;
  /**
   * The watched allocations without a steady answer: none yet, or Indeterminate last time
   * (what a backend reads again every call). Kept as answers come, so a steady call at
   * 10,000 watched allocations does not look through all of them to find the few.
   */
  unsettled(): ReadonlySet<string>;
}

export function sameObservation(
  a: AllocationObservation | undefined,
  b: AllocationObservation,
): boolean {
  if (a === b) return true;
  if (a === undefined || a.kind !== b.kind) return false;
  if (a.kind === "Indeterminate" || b.kind === "Indeterminate") {
    return a.kind === "Indeterminate" && b.kind === "Indeterminate" && a.message === b.message;
  }
  return (
    a.phase === b.phase &&
    a.reason === b.reason &&
    a.message === b.message &&
    a.exitCode === b.exitCode &&
    a.startedAt === b.startedAt &&
    a.endedAt === b.endedAt &&
    (a.deadlineAt ?? null) === (b.deadlineAt ?? null)
  );
}

/** `instance` must differ between processes (a restart must expire every older cursor). */
export function createChangeFeed(instance: string): ChangeFeed {
  const watched = new Map<string, WatchedAllocation>();
  const handles = new Map<string, string>();
  const unsettled = new Set<string>();
  const remember = (target: ObservationTarget, last: AllocationObservation | undefined) => {
    watched.set(target.allocationId, { target, last });
    if (last === undefined || last.kind === "Indeterminate") unsettled.add(target.allocationId);
    else unsettled.delete(target.allocationId);
  };
  let sequence = 0;
  let current: ObservationCursor | null = null;

  let membership = 0;
  const watch = (target: ObservationTarget) => {
    const previous = watched.get(target.allocationId);
    if (
      previous === undefined ||
      previous.target.handle !== target.handle ||
      previous.target.token !== target.token
    ) {
      membership += 1;
    }
    // A new handle for the allocation is a different job: its last answer says nothing.
    const last = previous?.target.handle === target.handle ? previous.last : undefined;
    remember(target, last);
    handles.set(target.handle, target.allocationId);
  };
  const unwatch = (allocationId: string) => {
    const entry = watched.get(allocationId);
    if (entry === undefined) return;
    watched.delete(allocationId);
    unsettled.delete(allocationId);
    membership += 1;
    if (handles.get(entry.target.handle) === allocationId) handles.delete(entry.target.handle);
  };

  return {
    open(cursor, targets) {
      if (cursor !== null && cursor !== current) return { kind: "CursorExpired" };
      if (cursor === null) {
        watched.clear();
        handles.clear();
        unsettled.clear();
        membership += 1;
      }
      for (const target of targets) watch(target);
      return { kind: "Open", cursor, watched, membership };
    },

    answer(opening, targets, observations) {
      const changes: ObservedChange[] = [];
      for (const [allocationId, observation] of observations) {
        const entry = watched.get(allocationId);
        if (entry === undefined) continue;
        // A first answer counts as a change too: one that joined in a call that then had no
        // answer (an outage) was never answered, and the caller may not target it again.
        if (opening.cursor !== null && !sameObservation(entry.last, observation)) {
          changes.push({ target: entry.target, observation });
        }
        if (observation.kind === "Observed" && isTerminal(observation.phase)) {
          unwatch(allocationId);
        } else {
          remember(entry.target, observation);
        }
      }
      const out = new Map<string, AllocationObservation>();
      for (const t of targets) {
        const o = observations.get(t.allocationId);
        if (o !== undefined) out.set(t.allocationId, o);
      }
      sequence += 1;
      current = `${instance}.${sequence}` as ObservationCursor;
      return { kind: "Observed", observations: out, changes, cursor: current };
    },

    byHandle: (handle) => handles.get(handle),
    unsettled: () => unsettled,
  };
}
