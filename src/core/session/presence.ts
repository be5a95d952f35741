/**
 * When a user counts as present, the rule the idle clock (core/reclaimer.ts) is fed by, for
 * every door: the HTTP exec and task routes, the Jupyter hub, MCP's run_code. A request a
 * user sent is presence when it arrives, while it runs and when it is answered; heartbeats,
 * a connected websocket and reads are not. Before, each door stamped `lastActiveAt` itself
 * with its own renewal: 10 s in the hub, a third of the idle timeout in a wrapper around the
 * exec service (which MCP shared), and none while a step (`POST .../tasks`) ran, so a step
 * longer than the idle timeout ran in a session the reclaimer saw as idle.
 *
 * A busy kernel is not idle, as Jupyter's culler leaves busy kernels alone by default: a cell
 * whose client went away still runs, so it still renews; the maximum lifetime bounds it.
 */
import { every, type Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { ActivityRecorder } from "../ports/activity-recorder.ts";
import type { ReclaimerDefaults } from "../reclaimer.ts";

export interface Presence {
  /** A user's request arrived (or was refused): present now. */
  seen(workloadId: string): void;
  /**
   * A user's request runs: present now, every renewal period while it runs, and when it
   * ends. Returns the end, to call once the request is answered (it stops the renewal).
   */
  whileRunning(workloadId: string): () => void;
}

export interface PresenceDeps {
  readonly activity: ActivityRecorder;
  readonly log: Log;
  readonly timers: Timers;
  /** The one renewal period (activityRenewMs). */
  readonly renewMs: number;
}

/** The renewal period: a third of the shortest idle timeout, at most 10 s, at least 250 ms. */
export function activityRenewMs(lease: ReclaimerDefaults): number {
  const idleMs = (lease.idleTimeoutSeconds ?? Number.POSITIVE_INFINITY) * 1000;
  // A spec's own idle timeout is at least 60 s, so 10 s serves every one of them.
  return Math.max(250, Math.min(10_000, Math.floor(idleMs / 3)));
}

export function createPresence(deps: PresenceDeps): Presence {
  const seen = (workloadId: string) => {
    try {
      deps.activity.touch(workloadId);
    } catch (error) {
      // The store closing under a daemon shutdown: the request is answered anyway.
      deps.log.warn("cannot record a user's activity", { workloadId, error: String(error) });
    }
  };
  return {
    seen,
    whileRunning(workloadId) {
      seen(workloadId);
      const stop = every(deps.timers, deps.renewMs, () => seen(workloadId));
      let ended = false;
      return () => {
        if (ended) return;
        ended = true;
        stop();
        seen(workloadId);
      };
    },
  };
}
