/**
 * The sessions seam of the composition. Sessions are opt-in: they need the worker gateway, and
 * the gateway listens only when OPENAI4S_WORKER_LISTEN says so (a listener on by default is
 * attack surface on every laptop that will never run a cluster job). `composeSessions`
 * returns null when sessions are off; the daemon then refuses SESSION attempts in the
 * preparer and answers exec with 409.
 *
 * The `Enabled` branch starts the sessions engine (session-engine.ts): the gateway, the
 * SESSION preparer, the readiness loop, the reclaimer and the session service; the daemon
 * only stops what this returns.
 */

import type { DaemonMetrics } from "../../../adapters/metrics/daemon-metrics.ts";
import { timedSessionService } from "../../../adapters/metrics/timed-session-service.ts";
import type { AttemptPreparer } from "../../../core/attempt-preparer.ts";
import type { StateLayout } from "../../../core/layout.ts";
import type { AllocationBackend } from "../../../core/ports/allocation-backend.ts";
import type { BarrierHooks } from "../../../core/reconciler/create-reconciler.ts";
import type { EnvironmentEndings } from "../../../core/session/environment-endings.ts";
import type { JupyterService } from "../../../core/session/jupyter-service.ts";
import { markSessionsUnobserved } from "../../../core/session/readiness.ts";
import type { SessionService } from "../../../core/session/session-port.ts";
import type { Clock } from "../../../lib/clock.ts";
import type { Log } from "../../../lib/log.ts";
import type { DaemonSettings } from "../config.ts";
import { startSessionEngine } from "./session-engine.ts";
import type { BoundStores } from "./stores.ts";
import { workerSocketPath } from "./worker-socket.ts";

export interface SessionsContext {
  readonly layout: StateLayout;
  readonly stores: Pick<BoundStores, "sessions" | "nonces" | "leases" | "activity">;
  readonly backend: AllocationBackend;
  readonly clock: Clock;
  readonly log: Log;
  /** Parsed once at start (config.ts): the gateway's address and the session settings. */
  readonly settings: DaemonSettings;
  readonly metrics: DaemonMetrics;
  /** Workers' reports of an unusable environment, which name their sessions' ends. */
  readonly environmentEndings: EnvironmentEndings;
}

export interface SessionsComponent {
  /** What `POST /v1/workloads/{id}/exec` calls. */
  readonly service: SessionService;
  /** What the Jupyter gateway (`/api/kernels`) calls. */
  readonly jupyter?: JupyterService;
  /** Prepares SESSION attempts (credentials, workspace marker, worker launch). */
  readonly preparer: AttemptPreparer;
  /** Stages 2 and 3 of the cancel barrier: stop what runs inside the allocation. */
  readonly barrierHooks?: BarrierHooks;
  /** Given the running reconciler once it exists, e.g. to wake it when a worker connects. */
  attachReconciler?(reconciler: { wake(): void }): void;
  /** Stops the gateway and any session loop; called before the database closes. */
  stop(): Promise<void>;
}

export async function composeSessions(context: SessionsContext): Promise<SessionsComponent | null> {
  const { workerListen, sessions } = context.settings;
  if (workerListen === null) {
    markSessionsUnobserved(
      context.stores.sessions,
      "the worker gateway is off on this daemon (OPENAI4S_WORKER_LISTEN is unset), so no session worker can connect",
    );
    return null;
  }
  const engine = startSessionEngine({
    layout: context.layout,
    stores: context.stores,
    backend: context.backend,
    clock: context.clock,
    log: context.log,
    listen: workerListen,
    unixSocket: workerSocketPath(context.layout),
    workerCommand: sessions.workerCommand,
    lease: sessions.lease,
    interruptGraceMs: sessions.interruptGraceMs,
    tls: sessions.tls,
    metrics: context.metrics,
    environmentEndings: context.environmentEndings,
  });
  return {
    service: timedSessionService(engine.service, context.metrics),
    jupyter: engine.jupyter,
    preparer: engine.preparer,
    barrierHooks: engine.barrierHooks,
    attachReconciler: (reconciler) => engine.attachReconciler(reconciler),
    stop: () => engine.stop(),
  };
}
