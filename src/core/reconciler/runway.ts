/**
 * Runway: the warning a running allocation gets before its time limit. Computed from the end
 * time the backend itself reported (stored per allocation as `deadlineAt`) and the injected
 * clock, so it agrees with what the job's own OPENAI4S_DEADLINE and the TIME_REMAINING view
 * say. Written once per allocation: the allocation's `deadlineWarnedAt` is set in the same
 * transaction as the event, so a re-run tick (or one after a crash) finds it set and writes
 * nothing.
 */

import type { Allocation, ResourceProfile } from "../models.ts";
import type { ReconcileItem, Transition } from "../ports/reconciler-store.ts";

/** How long before its limit an allocation is warned unless its profile says otherwise. */
export const DEFAULT_WARN_BEFORE_LIMIT_SECONDS = 300;

/** Per profile name, the warning lead in ms (0: no warning). Unknown profiles get the default. */
export function warningLeads(profiles: readonly ResourceProfile[]): (profile: string) => number {
  const byName = new Map<string, number>();
  for (const p of profiles) {
    byName.set(p.name, (p.warnBeforeLimitSeconds ?? DEFAULT_WARN_BEFORE_LIMIT_SECONDS) * 1000);
  }
  return (profile) => byName.get(profile) ?? DEFAULT_WARN_BEFORE_LIMIT_SECONDS * 1000;
}

/** "4 min 30 s", "45 s": how a person reads time left. */
function formatSecondsLeft(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const minutes = Math.floor(s / 60);
  const rest = s % 60;
  return rest === 0 ? `${minutes} min` : `${minutes} min ${rest} s`;
}

/**
 * When the warning of an allocation falls due (clock ms), or null when it never will: not
 * RUNNING, no known end time, already warned, or warnings turned off for its profile.
 */
export function warningDueAt(a: Allocation, leadMs: number): number | null {
  if (a.phase !== "RUNNING" || a.deadlineAt === null || a.deadlineWarnedAt !== null) return null;
  if (leadMs <= 0) return null;
  const wholeMs = a.startedAt === null ? null : a.deadlineAt - a.startedAt;
  const lead =
    wholeMs === null || wholeMs <= 0
      ? leadMs
      : Math.max(1000, Math.min(leadMs, Math.floor(wholeMs / 2)));
  return a.deadlineAt - lead;
}

/**
 * The warning step for one allocation that is RUNNING with a known end time, or null when it
 * is not due (too early, already written, turned off) or pointless (the limit already
 * passed: the backend is ending it, and a warning after the fact is noise). The lead is
 * never more than half the allocation's whole time, as the backend's own signal: a
 * ten-minute job is not "about to run out" the moment it starts.
 */
export function warnNearDeadline(a: Allocation, leadMs: number, now: number): Transition | null {
  const dueAt = warningDueAt(a, leadMs);
  if (dueAt === null || a.deadlineAt === null) return null;
  if (now < dueAt || now >= a.deadlineAt) return null;
  const left = formatSecondsLeft((a.deadlineAt - now) / 1000);
  return {
    allocation: {
      id: a.id,
      expectedPhase: "RUNNING",
      phase: "RUNNING",
      reason: a.reason,
      message: a.message,
      deadlineWarnedAt: now,
    },
    notice: {
      at: now,
      phase: "RUNNING",
      reason: "TIME_LIMIT_NEAR",
      message: `${left} left before its time limit (at ${new Date(a.deadlineAt).toISOString()}): save your work`,
    },
  };
}

/**
 * When each live workload's warning falls due, kept across ticks so `run` can wake for the
 * earliest one. The failure it guards: a loop backed off to its slowest period (30 s by
 * default) wrote TIME_LIMIT_NEAR up to that long after it was due, while a short lead is
 * only a minute or two. Fed with the items a tick read (before its own writes): a warning it
 * writes, or an end time it records, shows up when the workload is next read (a write makes
 * the next tick come at the minimum interval, and its workload is looked at again).
 */
export interface RunwaySchedule {
  /** Records the due times of `items`; `everyLive`: they are all live workloads, drop the rest. */
  note(
    items: Iterable<ReconcileItem>,
    leadMs: (profile: string) => number,
    everyLive: boolean,
  ): void;
  /** Forgets these workloads (ended, deleted). */
  forget(workloadIds: Iterable<string>): void;
  /** Workloads whose warning is due at `now` and whose limit has not passed. */
  dueNow(now: number): string[];
  /** The earliest due time strictly after `after` (clock ms), or null. */
  nextAfter(after: number): number | null;
}

interface Due {
  readonly dueAt: number;
  readonly deadlineAt: number;
}

/**
 * Every running allocation with a known end time has an entry (10,000 on a busy cluster),
 * and a steady tick asks `dueNow` and `run` asks `nextAfter` after every tick: a scan of
 * all of them each time cost a steady tick about 1 ms at 10,000 jobs. So the earliest due
 * time is kept: nothing is due before it, and it is the next one when it lies ahead. It is
 * found again by one scan only after the entry holding it left or moved later, and an entry
 * whose limit has passed leaves at the first scan that sees it so.
 */
export function createRunwaySchedule(): RunwaySchedule {
  const due = new Map<string, Due>();
  let earliest = Number.POSITIVE_INFINITY;
  let earliestKnown = true;
  const set = (id: string, d: Due) => {
    const previous = due.get(id);
    due.set(id, d);
    if (previous?.dueAt === earliest && d.dueAt > earliest) earliestKnown = false;
    else if (earliestKnown) earliest = Math.min(earliest, d.dueAt);
  };
  const remove = (id: string) => {
    const previous = due.get(id);
    if (previous === undefined) return;
    due.delete(id);
    if (previous.dueAt === earliest) earliestKnown = false;
  };
  const lowest = () => {
    if (!earliestKnown) {
      earliest = Number.POSITIVE_INFINITY;
      for (const { dueAt } of due.values()) earliest = Math.min(earliest, dueAt);
      earliestKnown = true;
    }
    return earliest;
  };
  return {
    note(items, leadMs, everyLive) {
      if (everyLive) {
        due.clear();
        earliest = Number.POSITIVE_INFINITY;
        earliestKnown = true;
      }
      for (const { workload, current: a } of items) {
        // The lead is asked for only when a warning may still come (it reads the profiles).
        const dueAt =
          a === null || a.deadlineAt === null || a.deadlineWarnedAt !== null
            ? null
            : warningDueAt(a, leadMs(workload.profile));
        if (dueAt === null || a === null || a.deadlineAt === null) remove(workload.id);
        else set(workload.id, { dueAt, deadlineAt: a.deadlineAt });
      }
    },
    forget(workloadIds) {
      for (const id of workloadIds) remove(id);
    },
    dueNow(now) {
      const out: string[] = [];
      if (lowest() > now) return out;
      for (const [id, d] of due) {
        if (now < d.dueAt) continue;
        if (now < d.deadlineAt) out.push(id);
        // Past its limit: no warning will ever be due (the backend is ending it), and kept it
        // would hold the earliest due time in the past, a scan of every entry each tick. A
        // clock set back finds it again at the next full tick, which notes every live one.
        else remove(id);
      }
      return out;
    },
    nextAfter(after) {
      const first = lowest();
      if (first > after) return first === Number.POSITIVE_INFINITY ? null : first;
      let next: number | null = null;
      for (const { dueAt } of due.values()) {
        if (dueAt > after && (next === null || dueAt < next)) next = dueAt;
      }
      return next;
    },
  };
}
