/**
 * Keeps a session active while one of its cells runs: the exec path renews the workload's
 * `lastActiveAt` so the reclaimer does not take a computation for an idle session.
 */
import { every, systemTimers, type Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { ActivityRecorder } from "../ports/activity-recorder.ts";
import type { ReclaimerDefaults } from "../reclaimer.ts";
import type { SessionService } from "./session-service.ts";

/** How often a running exec renews `lastActiveAt`: a third of the shortest idle timeout. */
export function activityRenewMs(lease: ReclaimerDefaults): number {
  const idleMs = (lease.idleTimeoutSeconds ?? Number.POSITIVE_INFINITY) * 1000;
  // A spec's own idle timeout is at least 60 s, so 10 s serves every one of them.
  return Math.max(250, Math.min(10_000, Math.floor(idleMs / 3)));
}

/**
 * A cell that is still running is a present user: the API stamps `lastActiveAt` when an
 * exec arrives and when it returns, so without this a computation longer than the idle
 * timeout was reclaimed under the user as "idle with no activity" (measured: an 80 s cell in
 * a session with a 60 s idle timeout was CANCELLED IDLE_TIMEOUT at 60 s and the exec
 * answered "worker not connected"). Heartbeats still renew nothing; only an exec a user
 * sent does, and only until it answers (its own timeoutSeconds, an interrupt, a restart).
 * A cell whose client went away still runs, so it still renews: a busy kernel is not idle,
 * as Jupyter's culler leaves busy kernels alone by default; the maximum lifetime bounds it.
 */
export function keepActiveWhileRunning(
  service: SessionService,
  deps: {
    readonly activity: ActivityRecorder;
    readonly log: Log;
    readonly renewMs: number;
    /** Default: the system's (lib/clock.ts). */
    readonly timers?: Timers;
  },
): SessionService {
  const timers = deps.timers ?? systemTimers;
  return {
    async exec(workloadId, code, execOptions) {
      const stopRenewing = every(timers, deps.renewMs, () => {
        try {
          deps.activity.touch(workloadId);
        } catch (error) {
          // The store closing under a daemon shutdown: the exec is answered anyway.
          deps.log.warn("cannot renew a running exec's activity", {
            workloadId,
            error: String(error),
          });
        }
      });
      try {
        return await service.exec(workloadId, code, execOptions);
      } finally {
        stopRenewing();
      }
    },
    interrupt: (workloadId) => service.interrupt(workloadId),
    restart: (workloadId) => service.restart(workloadId),
  };
}
