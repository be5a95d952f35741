/**
 * The sessions engine, assembled: signing key, worker gateway, SESSION preparer, readiness
 * loop, reclaimer, exec service and the session half of the cancel barrier. `composeSessions`
 * (sessions.ts) builds it only when the worker gateway is enabled (OPENAI4S_WORKER_LISTEN);
 * without a gateway no worker could dial back, so SESSION is refused instead.
 *
 * Wiring between the parts, and why:
 *  - gateway events (a worker connected or went away) trigger a readiness pass, so READY
 *    follows the last worker's connection by one pass instead of one period; a connection
 *    also wakes the reconciler, so the allocation's RUNNING is recorded on the next tick;
 *  - the reclaimer wakes the reconciler when it asks a session to stop, so the barrier runs
 *    on the next tick rather than at the next period;
 *  - an exec that finds its worker gone triggers readiness, so READY turns FALSE at once.
 */
import { randomBytes } from "node:crypto";
import type { DaemonMetrics } from "../../../adapters/metrics/daemon-metrics.ts";
import { createSessionAttempts } from "../../../adapters/spool/session-attempts.ts";
import { createSessionPreparer } from "../../../adapters/spool/session-preparer.ts";
import type { AttemptPreparer } from "../../../core/attempt-preparer.ts";
import type { StateLayout } from "../../../core/layout.ts";
import type { Workload } from "../../../core/models.ts";
import type { ActivityRecorder } from "../../../core/ports/activity-recorder.ts";
import type { AllocationBackend } from "../../../core/ports/allocation-backend.ts";
import type { NonceBurner } from "../../../core/ports/nonce-burner.ts";
import type { ReclaimerStore } from "../../../core/ports/reclaimer-store.ts";
import { SESSION_MAX_RANKS } from "../../../core/ports/session-attempts.ts";
import type { SessionStore } from "../../../core/ports/session-store.ts";
import type { GatewayEvent, WorkerGateway } from "../../../core/ports/worker-gateway.ts";
import { createReclaimer, type ReclaimerDefaults } from "../../../core/reclaimer.ts";
import type { BarrierHooks } from "../../../core/reconciler/types.ts";
import type { EnvironmentEndings } from "../../../core/session/environment-endings.ts";
import {
  createGatewayExpectations,
  createSessionBarrierHooks,
  createSessionService,
} from "../../../core/session/exec-service.ts";
import {
  createJupyterService,
  type JupyterService,
} from "../../../core/session/jupyter-service.ts";
import { createSessionReadiness, type SessionReadiness } from "../../../core/session/readiness.ts";
import type { SessionService } from "../../../core/session/session-port.ts";
import {
  createStandingSignal,
  type StandingSignal,
} from "../../../core/session/standing-signal.ts";
import { type Clock, systemTimers } from "../../../lib/clock.ts";
import type { Log } from "../../../lib/log.ts";
import { createWorkerGateway } from "../../../servers/worker-gateway/gateway.ts";
import { loadOrCreateSigningKey, type SigningKey } from "../../../wire/credential.ts";
import {
  type GatewayTls,
  type GatewayTlsResult,
  loadGatewayTls,
  loadOrCreateGatewayTls,
} from "../../../wire/gateway-tls.ts";
import { DEFAULT_LEASE, type GatewayTlsSetting } from "../config.ts";
import { openWorkerSocketToJobs, removeStaleWorkerSocket } from "./worker-socket.ts";

/**
 * A worker's first credential must outlive the allocation's wait in the backend's queue plus
 * the worker's start. A week covers a busy cluster; once connected, the gateway's short-lived
 * resume credentials take over, and the nonce is burned at first use either way.
 */
const DEFAULT_CREDENTIAL_TTL_MS = 7 * 24 * 60 * 60 * 1000;

/** The engine's persistence, one port per part, bound to the store by stores.ts. */
export interface SessionEngineStores {
  readonly sessions: SessionStore;
  readonly nonces: NonceBurner;
  readonly leases: ReclaimerStore;
  readonly activity: ActivityRecorder;
}

export interface SessionEngineOptions {
  readonly layout: StateLayout;
  readonly stores: SessionEngineStores;
  readonly backend: AllocationBackend;
  readonly clock: Clock;
  readonly log: Log;
  /** Validated HOST:PORT for the gateway to listen on. */
  readonly listen: string;
  /** The host written into credentials, when the listen host is not what workers dial. */
  readonly advertiseHost?: string;
  /** Also listen here (workers of jobs without network); see worker-socket.ts. */
  readonly unixSocket?: string;
  /** How a backend starts a worker; `--credential-dir DIR` and `--rank-env NAME` are appended. */
  readonly workerCommand: readonly string[];
  readonly lease?: ReclaimerDefaults;
  readonly credentialTtlMs?: number;
  /** Readiness pass period (default 200 ms). */
  readonly readinessIntervalMs?: number;
  /** Reclaimer pass period (default 1 s). */
  readonly reclaimIntervalMs?: number;
  /** After an interrupt, a cell still running this much later costs its kernel (restarted). */
  readonly interruptGraceMs?: number;
  /** TLS on the worker gateway (default: a certificate generated into the state dir). */
  readonly tls?: GatewayTlsSetting;
  /** Gateway connections and refusals, time to READY. */
  readonly metrics?: DaemonMetrics;
  /** Where a worker's report of an unusable environment goes, to name the session's end. */
  readonly environmentEndings?: EnvironmentEndings;
}

/** The gateway's figures for /metrics: connections, disconnections, refusals. */
function countGatewayEvent(metrics: DaemonMetrics | undefined, event: GatewayEvent): void {
  if (metrics === undefined) return;
  if (event.kind === "WorkerConnected") metrics.gateway.connections += 1;
  else if (event.kind === "WorkerDisconnected") metrics.gateway.disconnections += 1;
  else if (event.kind === "CredentialRefused") metrics.gateway.refusals += 1;
}

function gatewayTls(setting: GatewayTlsSetting, layout: StateLayout, log: Log): GatewayTls | null {
  let result: GatewayTlsResult;
  switch (setting.kind) {
    case "Off":
      log.warn(
        "worker gateway: TLS is off (OPENAI4S_WORKER_TLS=off): code and output cross the network in clear text",
      );
      return null;
    case "Generated":
      result = loadOrCreateGatewayTls(
        { key: layout.gatewayTlsKey, cert: layout.gatewayTlsCert },
        new Date(),
      );
      break;
    case "Given":
      result = loadGatewayTls({ key: setting.key, cert: setting.cert });
      break;
    default: {
      const never: never = setting;
      throw new Error(`unhandled TLS setting ${JSON.stringify(never)}`);
    }
  }
  if (result.kind === "Invalid") throw new Error(result.message);
  log.info("worker gateway: TLS", {
    fingerprint: result.tls.fingerprint,
    ...(result.generated && { generated: true }),
  });
  return result.tls;
}

export interface SessionEngine {
  readonly gateway: WorkerGateway;
  readonly service: SessionService;
  /** The Jupyter gateway's way into the kernels (servers/http/jupyter/). */
  readonly jupyter: JupyterService;
  readonly preparer: AttemptPreparer;
  readonly barrierHooks: BarrierHooks;
  readonly readiness: SessionReadiness;
  /** The reconciler, once it exists: the reclaimer wakes it after requesting a stop. */
  attachReconciler(reconciler: { wake(): void }): void;
  /** Stops the loops and closes the gateway WITHOUT stopping workers (they resume). */
  stop(): Promise<void>;
}

export function startSessionEngine(options: SessionEngineOptions): SessionEngine {
  const { layout, stores, backend, clock, log } = options;
  const key = loadOrCreateSigningKey(layout.signingKey);
  const attempts = createSessionAttempts({ layout, key });
  // What the preparer wrote an attempt record under: one rank per node of the profile. A
  // profile no longer offered keeps the global bound (a record is still never unbounded).
  const maxRanksOf = (workload: Workload): number =>
    backend.profiles().find((p) => p.name === workload.profile)?.resources.nodes ??
    SESSION_MAX_RANKS;
  const tls = gatewayTls(options.tls ?? { kind: "Generated" }, layout, log);
  let readiness: SessionReadiness | null = null;
  // Readiness tells the Jupyter hub's waiters; one per daemon, shared by the two.
  const standingSignal = createStandingSignal();
  let jupyterService: JupyterService | null = null;
  let reconciler: { wake(): void } | null = null;

  const gateway = openGateway(options, {
    key,
    tls,
    expectations: createGatewayExpectations({ store: stores.sessions, attempts, maxRanksOf }),
    // Gateway events trigger a readiness pass; a connection also wakes the reconciler.
    readiness: () => readiness,
    reconciler: () => reconciler,
    jupyter: () => jupyterService,
  });
  readiness = createSessionReadiness({
    timers: systemTimers,
    store: stores.sessions,
    gateway,
    attempts,
    maxRanksOf,
    clock,
    log,
    onStandingChanged: (workloadId) => standingSignal.notify(workloadId),
    onReady: (workload, readyAt) =>
      options.metrics?.timeToReady
        .get(workload.profile)
        .observe((readyAt - workload.createdAt) / 1000),
    ...(options.readinessIntervalMs !== undefined
      ? { intervalMs: options.readinessIntervalMs }
      : {}),
  });
  const ready = readiness;
  const reclaimer = createReclaimer({
    timers: systemTimers,
    store: stores.leases,
    clock,
    log,
    defaults: options.lease ?? DEFAULT_LEASE,
    ...(options.reclaimIntervalMs !== undefined ? { intervalMs: options.reclaimIntervalMs } : {}),
    onStopRequested: () => reconciler?.wake(),
  });
  const preparer = createSessionPreparer({
    layout,
    key,
    clock,
    random: (n) => randomBytes(n),
    gatewayAddress: gateway.address,
    gatewayFingerprint: tls?.fingerprint ?? null,
    workerCommand: options.workerCommand,
    credentialTtlMs: options.credentialTtlMs ?? DEFAULT_CREDENTIAL_TTL_MS,
    backend,
  });
  const { service, jupyter } = execServices(options, gateway, standingSignal, () =>
    ready.trigger(),
  );
  jupyterService = jupyter;
  const barrierHooks = createSessionBarrierHooks({ gateway, clock, log });

  const loops = new AbortController();
  const running = Promise.all([ready.run(loops.signal), reclaimer.run(loops.signal)]);
  let stopping: Promise<void> | null = null;

  return {
    gateway,
    service,
    jupyter,
    preparer,
    barrierHooks,
    readiness: ready,
    attachReconciler(r) {
      reconciler = r;
    },
    stop() {
      stopping ??= (async () => {
        loops.abort();
        await running;
        await gateway.close();
        if (options.unixSocket !== undefined) removeStaleWorkerSocket(options.unixSocket);
      })();
      return stopping;
    },
  };
}

interface GatewayParts {
  readonly key: SigningKey;
  readonly tls: GatewayTls | null;
  readonly expectations: ReturnType<typeof createGatewayExpectations>;
  /** Read at each event: the readiness loop and the reconciler exist only later. */
  readonly readiness: () => SessionReadiness | null;
  readonly reconciler: () => { wake(): void } | null;
  readonly jupyter: () => JupyterService | null;
}

/** The worker gateway, listening (and on its unix socket for jobs without network). */
function openGateway(options: SessionEngineOptions, parts: GatewayParts): WorkerGateway {
  const { stores, clock, log } = options;
  if (options.unixSocket !== undefined) removeStaleWorkerSocket(options.unixSocket);
  const gateway = createWorkerGateway({
    timers: systemTimers,
    listen: options.listen,
    ...(options.unixSocket !== undefined ? { unixSocket: options.unixSocket } : {}),
    tls: parts.tls,
    ...(options.advertiseHost !== undefined ? { advertiseHost: options.advertiseHost } : {}),
    store: stores.nonces,
    key: parts.key,
    clock,
    log,
    expectations: parts.expectations,
    onEvent(event) {
      countGatewayEvent(options.metrics, event);
      if (event.kind === "EnvironmentUnavailable") {
        options.environmentEndings?.note(event.allocationId, event.message);
        return;
      }
      // Output between cells: to the Jupyter sockets of its session, live.
      if (event.kind === "KernelOutput") {
        parts.jupyter()?.kernelOutput(event);
        return;
      }
      if (
        event.kind === "WorkerConnected" ||
        event.kind === "WorkerDisconnected" ||
        event.kind === "KernelStatus"
      ) {
        parts.readiness()?.trigger();
      }
      // A worker that dialled in is running, whatever the backend's last answer said: a tick
      // now records RUNNING without waiting out the reconciler's period.
      if (event.kind === "WorkerConnected") parts.reconciler()?.wake();
    },
  });
  if (options.unixSocket !== undefined) openWorkerSocketToJobs(options.unixSocket);
  return gateway;
}

/** The exec service (kept active while a cell runs) and the Jupyter kernels' service. */
function execServices(
  options: SessionEngineOptions,
  gateway: WorkerGateway,
  standingSignal: StandingSignal,
  onWorkerLost: () => void,
): { readonly service: SessionService; readonly jupyter: JupyterService } {
  const { stores, log } = options;
  const service = createSessionService({
    timers: systemTimers,
    store: stores.sessions,
    gateway,
    log,
    onWorkerLost,
    ...(options.interruptGraceMs !== undefined && {
      interruptGraceMs: options.interruptGraceMs,
    }),
  });
  const jupyter = createJupyterService({
    store: stores.sessions,
    gateway,
    log,
    onWorkerLost,
    standingSignal,
  });
  return { service, jupyter };
}
