/**
 * Watches every backend call as it happens, across ticks and lanes, so trouble is known the
 * moment a call is slow rather than when it finally fails: one of the two witnesses of the
 * backend's health, whose verdict is `core/backend-health.ts`'s alone. The failure it guards against:
 * after the scheduler stopped, diagnostics said "healthy" for ~10 s because the listing
 * already in flight took that long to time out. A call in flight past `slowCallMs` marks the
 * backend degraded at once; so does a call that answered "unavailable" or threw, until a
 * later call succeeds.
 */
import type { WatchedHealth } from "../backend-health.ts";
import { type BackendOperation, zeroBackendCounts } from "./types.ts";

/** The watch's witness (a name kept for the reconciler's callers). */
export type BackendHealth = WatchedHealth;

export interface BackendWatch {
  /** A call starts; call the returned function when it answered (ok: a real answer). */
  begin(operation: BackendOperation): (ok: boolean) => void;
  health(): BackendHealth;
  /** Calls started per second over the last minute (or since start, if shorter). */
  callsPerSecond(): number;
  /** Calls started since this process began, by operation. */
  totals(): Readonly<Record<BackendOperation, number>>;
}

export interface BackendWatchOptions {
  readonly slowCallMs: number;
  readonly monotonicMs: () => number;
}

const RATE_WINDOW_MS = 60_000;

export function createBackendWatch(options: BackendWatchOptions): BackendWatch {
  const { slowCallMs, monotonicMs } = options;
  const startedAtMs = monotonicMs();
  const inFlight = new Map<number, { operation: BackendOperation; sinceMs: number }>();
  const recent: number[] = [];
  const totals = zeroBackendCounts();
  let nextId = 0;
  let failure: string | null = null;

  const prune = (nowMs: number) => {
    while (recent.length > 0 && (recent[0] as number) < nowMs - RATE_WINDOW_MS) recent.shift();
  };

  return {
    begin(operation) {
      const id = nextId++;
      const sinceMs = monotonicMs();
      inFlight.set(id, { operation, sinceMs });
      totals[operation] += 1;
      recent.push(sinceMs);
      prune(sinceMs);
      let done = false;
      return (ok) => {
        if (done) return;
        done = true;
        inFlight.delete(id);
        failure = ok ? null : `the last ${operation} call got no answer`;
      };
    },
    health() {
      const nowMs = monotonicMs();
      for (const { operation, sinceMs } of inFlight.values()) {
        const ageMs = nowMs - sinceMs;
        if (ageMs > slowCallMs) {
          return {
            kind: "Degraded",
            message: `a ${operation} call has waited ${Math.round(ageMs)} ms for an answer`,
          };
        }
      }
      return failure === null ? { kind: "Healthy" } : { kind: "Degraded", message: failure };
    },
    callsPerSecond() {
      const nowMs = monotonicMs();
      prune(nowMs);
      const spanMs = Math.min(RATE_WINDOW_MS, Math.max(1000, nowMs - startedAtMs));
      return recent.length / (spanMs / 1000);
    },
    totals: () => ({ ...totals }),
  };
}
