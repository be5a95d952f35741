/**
 * Leases that expire, so idle sessions stop holding resources others queue for.
 *
 * It only expresses intent: `requestStop` with a reason code, and nothing more. The
 * reconciler's cancel barrier is the only place resources are really returned; a second
 * teardown path here would diverge from that one on exactly the failure that matters most
 * (a backend that lags, a worker that will not die).
 *
 * A live worker is not a present user. A session whose process is healthy, socket connected
 * and heartbeats on time is idle if nobody has run anything in it. So the idle clock reads
 * only `lastActiveAt`, which only user activity (exec, tasks) writes, and this module never
 * writes it.
 *
 * Two clocks, two reasons, because telling a session that can never come back "come back
 * later" is the wrong sentence:
 *  - IDLE_TIMEOUT: now − max(lastActiveAt, when the current attempt started running) has
 *    reached the idle timeout. The attempt's start counts as activity because a session that
 *    waited in a queue longer than its idle timeout must not be reclaimed the instant it
 *    finally gets resources: nobody could have used it before.
 *  - MAX_LIFETIME: now − when the session FIRST held resources (the earliest startedAt over
 *    all its attempts) has reached the maximum lifetime. Queue time does not count (nothing
 *    was held), and a recovery does not restart the lease (the lease belongs to the session,
 *    not to one attempt).
 * When both have run out, MAX_LIFETIME wins: the lease is over whatever the user does, and
 * "start a new session when you are back" would suggest activity could have saved it.
 *
 * Only SESSION workloads in RUNNING that still want to run are considered: a queued session
 * holds nothing, and one already asked to stop keeps its first reason (requestStop's rule).
 */
import type { Clock, Timers } from "../lib/clock.ts";
import type { Log } from "../lib/log.ts";
import type { Allocation, Workload } from "./models.ts";
import type { ReclaimerStore } from "./ports/reclaimer-store.ts";

export interface ReclaimerDefaults {
  /** Used when the spec does not say; null means no idle limit. */
  readonly idleTimeoutSeconds: number | null;
  /** Used when the spec does not say; null means no lifetime limit. */
  readonly maxLifetimeSeconds: number | null;
}

export interface ReclaimerOptions {
  readonly store: ReclaimerStore;
  readonly clock: Clock;
  readonly log: Log;
  readonly defaults: ReclaimerDefaults;
  /** Period of `run`. Default 1000 ms: an expired lease is acted on within about a second. */
  readonly intervalMs?: number;
  /** What `run` waits on between passes (tests: a manual timeline), from the composition. */
  readonly timers: Timers;
  /** Called after a stop was requested, e.g. to wake the reconciler so the barrier runs now. */
  readonly onStopRequested?: (workloadId: string) => void;
}

export type ReclaimDecision =
  | { readonly kind: "Keep" }
  | {
      readonly kind: "Stop";
      readonly reason: "IDLE_TIMEOUT" | "MAX_LIFETIME";
      readonly message: string;
    };

export interface ReclaimedSession {
  readonly workloadId: string;
  readonly reason: "IDLE_TIMEOUT" | "MAX_LIFETIME";
  readonly message: string;
}

export interface Reclaimer {
  /** One pass over the live sessions; returns the stops this pass requested. */
  reclaimOnce(): readonly ReclaimedSession[];
  /** Runs passes every `intervalMs` until the signal aborts. */
  run(signal: AbortSignal): Promise<void>;
}

const MS_PER_SECOND = 1000;

/**
 * The decision for one session, as a pure function of what the store holds and the time, so
 * the two clocks can be tested (and property-tested) without a database.
 */
export function decideReclaim(
  workload: Workload,
  allocations: readonly Allocation[],
  current: Allocation | null,
  nowMs: number,
  defaults: ReclaimerDefaults,
): ReclaimDecision {
  const maxLifetimeSeconds = workload.spec.maxLifetimeSeconds ?? defaults.maxLifetimeSeconds;
  const idleTimeoutSeconds = workload.spec.idleTimeoutSeconds ?? defaults.idleTimeoutSeconds;

  const starts = allocations.map((a) => a.startedAt).filter((t): t is number => t !== null);
  if (maxLifetimeSeconds !== null && starts.length > 0) {
    const heldMs = nowMs - Math.min(...starts);
    if (heldMs >= maxLifetimeSeconds * MS_PER_SECOND) {
      return {
        kind: "Stop",
        reason: "MAX_LIFETIME",
        message:
          `the session reached its maximum lifetime of ${maxLifetimeSeconds} s; the lease is ` +
          "over and it cannot be extended",
      };
    }
  }

  if (idleTimeoutSeconds !== null) {
    const since = Math.max(workload.lastActiveAt ?? workload.createdAt, current?.startedAt ?? 0);
    const idleMs = nowMs - since;
    if (idleMs >= idleTimeoutSeconds * MS_PER_SECOND) {
      return {
        kind: "Stop",
        reason: "IDLE_TIMEOUT",
        message:
          `the session was idle for ${Math.floor(idleMs / MS_PER_SECOND)} s with no activity ` +
          `(idle timeout ${idleTimeoutSeconds} s); start a new session when you are back`,
      };
    }
  }
  return { kind: "Keep" };
}

export function createReclaimer(options: ReclaimerOptions): Reclaimer {
  const { store, clock, log, defaults } = options;
  const intervalMs = options.intervalMs ?? 1000;
  const { timers } = options;

  function reclaimOnce(): readonly ReclaimedSession[] {
    const stopped: ReclaimedSession[] = [];
    for (const { workload, current } of store.loadLiveView()) {
      if (workload.kind !== "SESSION" || workload.phase !== "RUNNING") continue;
      if (workload.desired.kind !== "RUN") continue;
      const decision = decideReclaim(
        workload,
        store.listAllocations(workload.id),
        current,
        clock.now(),
        defaults,
      );
      switch (decision.kind) {
        case "Keep":
          break;
        case "Stop": {
          const result = store.requestStop(workload.id, decision.reason, decision.message);
          if (result.kind === "Requested") {
            log.info("session lease expired; stop requested", {
              workloadId: workload.id,
              reason: decision.reason,
            });
            stopped.push({
              workloadId: workload.id,
              reason: decision.reason,
              message: decision.message,
            });
            options.onStopRequested?.(workload.id);
          }
          break;
        }
        default: {
          const unreachable: never = decision;
          throw new Error(`unhandled decision ${JSON.stringify(unreachable)}`);
        }
      }
    }
    return stopped;
  }

  async function run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        reclaimOnce();
      } catch (error) {
        // A locked or briefly unavailable store is retried next period; the loop must not die.
        log.error("reclaimer pass failed", { error: String(error) });
      }
      await abortableSleep(timers, intervalMs, signal);
    }
  }

  return { reclaimOnce, run };
}

function abortableSleep(timers: Timers, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const cancel = timers.after(ms, done);
    function done() {
      cancel();
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
