/**
 * Scheduler calls per second over the last hour, for the cluster page's chart. The
 * reconciler counts calls since start (by operation); this keeps that running total as seen
 * once per sample, and a point's rate is the growth between two samples over the time
 * between them. No timer here: the daemon samples on its own schedule, tests by hand.
 */

export interface CallRatePoint {
  /** Epoch milliseconds at the end of the interval. */
  readonly atMs: number;
  readonly perSecond: number;
}

export interface CallRateHistory {
  /** The calls made since start, as counted at `nowMs`. */
  record(nowMs: number, totalCalls: number): void;
  /** The rates within the window ending at `nowMs`, oldest first. */
  points(nowMs: number): readonly CallRatePoint[];
  /** When the first sample was taken; null before it. */
  since(): number | null;
}

export const CALL_HISTORY_WINDOW_MS = 3_600_000;

export function createCallRateHistory(windowMs = CALL_HISTORY_WINDOW_MS): CallRateHistory {
  const samples: { atMs: number; total: number }[] = [];
  let first: number | null = null;
  return {
    record(nowMs, totalCalls) {
      first ??= nowMs;
      samples.push({ atMs: nowMs, total: totalCalls });
      // One sample before the window stays: the first point inside it needs a start.
      while (samples.length > 2 && (samples[1]?.atMs ?? nowMs) <= nowMs - windowMs) {
        samples.shift();
      }
    },
    points(nowMs) {
      const out: CallRatePoint[] = [];
      for (let i = 1; i < samples.length; i++) {
        const a = samples[i - 1];
        const b = samples[i];
        if (!a || !b || b.atMs <= a.atMs || b.atMs <= nowMs - windowMs) continue;
        // A counter that went down (a restarted reconciler) starts over from zero.
        const grew = b.total >= a.total ? b.total - a.total : b.total;
        out.push({ atMs: b.atMs, perSecond: grew / ((b.atMs - a.atMs) / 1000) });
      }
      return out;
    },
    since: () => first,
  };
}
