/**
 * Runway: the warning a running allocation gets before its time limit. Computed from the end
 * time the backend itself reported (stored per allocation as `deadlineAt`) and the injected
 * clock, so it agrees with what the job's own OPENAI4S_DEADLINE and the TIME_REMAINING view
 * say. Written once per allocation: the allocation's `deadlineWarnedAt` is set in the same
 * transaction as the event, so a re-run tick (or one after a crash) finds it set and writes
 * nothing.
 */

import type { Allocation, ResourceProfile } from "../models.ts";
import type { Transition } from "../ports/reconciler-store.ts";

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
 * The warning step for one allocation that is RUNNING with a known end time, or null when it
 * is not due (too early, already written, turned off) or pointless (the limit already
 * passed: the backend is ending it, and a warning after the fact is noise). The lead is
 * never more than half the allocation's whole time, as the backend's own signal: a
 * ten-minute job is not "about to run out" the moment it starts.
 */
export function warnNearDeadline(a: Allocation, leadMs: number, now: number): Transition | null {
  if (a.phase !== "RUNNING" || a.deadlineAt === null || a.deadlineWarnedAt !== null) return null;
  if (leadMs <= 0) return null;
  const wholeMs = a.startedAt === null ? null : a.deadlineAt - a.startedAt;
  const lead =
    wholeMs === null || wholeMs <= 0
      ? leadMs
      : Math.max(1000, Math.min(leadMs, Math.floor(wholeMs / 2)));
  if (now < a.deadlineAt - lead || now >= a.deadlineAt) return null;
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
