/**
 * The exec histogram, measured around the session service: request to outcome, whatever the
 * outcome (NotReady answers fast and is counted too: a flood of them is worth seeing).
 */
import type { SessionService } from "../../core/session/session-port.ts";
import type { DaemonMetrics } from "./daemon-metrics.ts";

export function timedSessionService(
  inner: SessionService,
  metrics: DaemonMetrics,
  monotonicMs: () => number = () => performance.now(),
): SessionService {
  return {
    async exec(workloadId, code, options) {
      const t0 = monotonicMs();
      try {
        return await inner.exec(workloadId, code, options);
      } finally {
        metrics.execDuration.observe((monotonicMs() - t0) / 1000);
      }
    },
    interrupt: (workloadId) => inner.interrupt(workloadId),
    restart: (workloadId) => inner.restart(workloadId),
  };
}
