/**
 * The daemon's working parts, built in one place: the store's ports, the backend (by name,
 * guarded by live allocations), the sessions engine, the attempt preparers and the
 * reconciler. The daemon starts and stops what this returns; it binds no adapter and builds
 * no part itself.
 */
import type { Clock } from "../clock.ts";
import type { FaultPoints } from "../fault-point.ts";
import type { Log } from "../log.ts";
import type { DaemonMetrics } from "../metrics/daemon-metrics.ts";
import { observeTransitions } from "../metrics/transition-observer.ts";
import { batchPreparer } from "../orchestration/batch-preparer.ts";
import { guardedByLiveAllocations } from "../orchestration/isolation/live-guard.ts";
import type { StateLayout } from "../orchestration/layout.ts";
import type { AdmissionStore } from "../orchestration/ports/admission-store.ts";
import type { AllocationBackend } from "../orchestration/ports.ts";
import { preparerByKind } from "../orchestration/preparer-by-kind.ts";
import { createReconciler, type Reconciler } from "../orchestration/reconciler.ts";
import type { RunAs } from "../orchestration/sandbox.ts";
import { sessionsDisabledPreparer } from "../orchestration/session/preparer.ts";
import type { StoreDeps } from "../store/deps.ts";
import { createBackend } from "./backends.ts";
import type { BackgroundService } from "./context.ts";
import { composeSessions, type SessionsComponent } from "./sessions.ts";
import { bindStores } from "./stores.ts";

export interface CoreConfig {
  readonly backendName: string;
  readonly layout: StateLayout;
  readonly store: StoreDeps;
  readonly faults: FaultPoints;
  readonly clusterConfigPath: string | null;
  readonly selfCommand: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly runAs: RunAs | null;
  readonly clock: Clock;
  readonly log: Log;
  /** Where the reconciler, the store observer and the sessions engine record figures. */
  readonly metrics: DaemonMetrics;
  readonly tickIntervalMs?: number;
  readonly pacing?: {
    readonly minIntervalMs?: number;
    readonly maxIntervalMs?: number;
    readonly maxCommandsInFlight?: number;
  };
}

export interface Core {
  readonly backend: AllocationBackend;
  readonly reconciler: Reconciler;
  /** Null when sessions are off (no worker gateway). */
  readonly sessions: SessionsComponent | null;
  /** The backend's own background work (the orphan sweep, isolation verifiers). */
  readonly services: readonly BackgroundService[];
  /** What the API's admission writes through. */
  readonly admission: AdmissionStore;
}

export type CoreResult =
  | { readonly kind: "Composed"; readonly core: Core }
  /** Something the admin must fix (exit 2); nothing built is left running. */
  | { readonly kind: "ConfigError"; readonly message: string };

export async function composeCore(config: CoreConfig): Promise<CoreResult> {
  const { layout, clock, log, faults } = config;
  const stores = bindStores(config.store);
  const created = await createBackend(config.backendName, {
    faults,
    layout,
    clusterConfigPath: config.clusterConfigPath,
    selfCommand: config.selfCommand,
    clock,
    log,
    env: config.env,
    runAs: config.runAs,
    knownTokens: stores.knownTokens,
  });
  if (created.kind === "ConfigError") {
    return { kind: "ConfigError", message: created.message };
  }
  // SESSIONs wait while any live allocation runs outside the verified sandbox.
  const backend = guardedByLiveAllocations(created.backend, stores.unsandboxedLive);

  // Sessions (opt-in: the worker gateway only listens when OPENAI4S_WORKER_LISTEN says so).
  // Null means SESSION attempts are refused by the preparer, after admission already
  // refused them for lack of isolation.
  let sessions: SessionsComponent | null;
  try {
    sessions = await composeSessions({
      layout,
      stores,
      backend,
      clock,
      log,
      env: config.env,
      selfCommand: config.selfCommand,
      metrics: config.metrics,
    });
  } catch (error) {
    // The backend's verifiers started when it was made; they must not outlive the refusal.
    await Promise.all((created.services ?? []).map((service) => service.stop()));
    return { kind: "ConfigError", message: `sessions: ${String(error)}` };
  }

  const preparer = preparerByKind({
    BATCH: batchPreparer({ layout }),
    SESSION:
      sessions?.preparer ??
      sessionsDisabledPreparer("sessions are not enabled on this daemon (no worker gateway)"),
  });
  const { metrics } = config;
  const observer = observeTransitions(stores.reconciler, metrics);
  const running = createReconciler({
    store: observer.store,
    onTickEnded: (report) => metrics.tickDuration.observe(report.durationMs / 1000),
    backend,
    preparer,
    clock,
    log,
    faultPoint: (point) => faults.hit(point),
    ...(sessions?.barrierHooks ? { barrierHooks: sessions.barrierHooks } : {}),
    ...(config.tickIntervalMs !== undefined ? { tickIntervalMs: config.tickIntervalMs } : {}),
    ...config.pacing,
  });
  // Admission hands a POST's first attempt to a lane before any view load has the workload;
  // the observer learns it here to measure that submit.
  const reconciler: Reconciler = {
    ...running,
    admitted(workload, attempt) {
      observer.admitted(workload);
      running.admitted(workload, attempt);
    },
  };
  sessions?.attachReconciler?.(reconciler);
  return {
    kind: "Composed",
    core: {
      backend,
      reconciler,
      sessions,
      services: created.services ?? [],
      admission: stores.admission,
    },
  };
}
