/**
 * The daemon: state dir, admin token, store, the working parts the composition builds
 * (apps/daemon/composition/core.ts: backend, sessions, preparers, reconciler), the reconciler loop, and
 * one HTTP listener per `--listen`. `startDaemon` returns once everything listens; `stop()` is the graceful
 * shutdown SIGTERM triggers: stop accepting, let the tick in progress finish, close the
 * database, remove the sockets. A restart then picks every workload up where it was,
 * because nothing that matters lives only in this process.
 */

import { existsSync, mkdirSync, realpathSync } from "node:fs";
import type { Server } from "bun";
import {
  chooseJobIdentity,
  type IdentityChoice,
  systemIdentityDatabase,
} from "../../adapters/isolation-bwrap/run-as.ts";
import { createDaemonMetrics } from "../../adapters/metrics/daemon-metrics.ts";
import { createProcessFigures } from "../../adapters/metrics/process-figures.ts";
import {
  type OpenedDatabase,
  openDatabase,
  type StoreDeps,
  startWalCheckpointer,
} from "../../adapters/store-sqlite/index.ts";
import { checkDatabaseFilesystem } from "../../adapters/store-sqlite/network-fs.ts";
import {
  checkLayoutSeparation,
  defaultSpoolDir,
  type StateLayout,
  stateLayout,
  WORKLOADS_DIR,
} from "../../core/layout.ts";
import type { AllocationBackend } from "../../core/ports.ts";
import type { PrincipalLimits } from "../../core/principals.ts";
import { type Clock, every, systemTimers, withDeadline } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { createApp } from "../../servers/http/app.ts";
import type { Access, ApiBindings } from "../../servers/http/deps.ts";
import { bunWebSocket, type SocketHandlers } from "../../servers/http/jupyter/socket.ts";
import { createCallRateHistory } from "../../servers/http/ui/call-rate-history.ts";
import { declaresBody } from "../../servers/http/validation.ts";
import { AdminTokenError, loadOrCreateAdminToken } from "./admin-token.ts";
import { fileAuditLog } from "./audit-log.ts";
import { BACKENDS, composeCore, migrateBackendRecords } from "./composition/index.ts";
import { parseDaemonSettings, settingErrorsMessage } from "./config.ts";
import { formatListenAddress, type ListenAddress } from "./listen.ts";
import { watchSpool } from "./spool-watch.ts";
import {
  prepareDatabaseFile,
  prepareSpoolDir,
  prepareStateDir,
  SPOOL_DIR_ENV,
} from "./state-dir.ts";
import { lockStateDir } from "./state-lock.ts";
import { migrateStateDir } from "./state-migration.ts";
import { checkAncestors, checkFutureDir, checkStateDirOwnership } from "./state-ownership.ts";
import { storeBackup, sweepBackupLeftovers } from "./store-backup.ts";
import { clearStaleSocket, removeSocket, withPrivateSocket } from "./unix-socket.ts";

export interface DaemonConfig {
  /** The private state dir (layout.ts). */
  readonly stateDir: string;
  /** `--spool-dir`/`$OPENAI4S_SPOOL_DIR`; null for the backend's default (`STATE_DIR-spool`). */
  readonly spoolDir?: string | null;
  /** `--allow-network-db`: open the database even on NFS, Lustre, GPFS, CIFS... */
  readonly allowNetworkDb?: boolean;
  /** `--spool-low-water`; null or absent: 5 % of the spool's filesystem, at most 1 GiB. */
  readonly spoolLowWaterBytes?: number | null;
  /** The uid the state dir must belong to; default the process's effective uid. */
  readonly uid?: number;
  /** Already validated (loopback or --allow-remote) by the caller. */
  readonly listen: readonly ListenAddress[];
  readonly backend: string;
  readonly clusterConfigPath: string | null;
  readonly version: string;
  /** The daemon's environment, read once here and passed down. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly selfCommand: readonly string[];
  readonly clock: Clock;
  readonly log: Log;
  /**
   * Who jobs run as (`serve --run-as` / `--uid-range`, validated there). Absent: a leased uid
   * per workload from the default range when the daemon runs as root, else its own uid.
   */
  readonly identity?: IdentityChoice;
  /** `serve --allow-unsandboxed-batch`: BATCH may run as the daemon's uid, unsandboxed. */
  readonly allowUnsandboxedBatch?: boolean;
  /** Limits a new principal gets when `principal add` names none (`serve --principal-max-*`). */
  readonly principalDefaults?: PrincipalLimits;
  /** Polling ceiling, back-off maximum and command bound (`serve --poll-min-ms` ...). */
  readonly pacing?: {
    readonly minIntervalMs?: number;
    readonly maxIntervalMs?: number;
    readonly maxCommandsInFlight?: number;
  };
  /** How long shutdown waits for in-flight requests before closing their connections. */
  readonly drainTimeoutMs?: number;
  /** How long every listener waits for a request body (`serve --body-timeout-ms`). */
  readonly bodyTimeoutMs?: number;
  /** The largest file upload accepted (`serve --max-upload-size`); default 16 GiB. */
  readonly maxUploadBytes?: number;
}

const DEFAULT_MAX_UPLOAD_BYTES = 16 * 1024 ** 3;

export interface RunningDaemon {
  readonly layout: StateLayout;
  /** What each listener bound, e.g. `unix:/state/api.sock` or `127.0.0.1:41234`. */
  readonly listening: readonly string[];
  readonly backend: AllocationBackend;
  /** Graceful shutdown; safe to call twice (the second call waits for the first). */
  stop(): Promise<void>;
}

export type StartResult =
  | { readonly kind: "Started"; readonly daemon: RunningDaemon }
  /** Something the admin must fix (exit 2). */
  | { readonly kind: "ConfigError"; readonly message: string }
  /** The environment refused (exit 1): a socket in use, a port taken. */
  | { readonly kind: "Failed"; readonly message: string };

/** Undo stack: everything started so far is stopped in reverse if a later step fails. */
type Cleanup = () => Promise<void> | void;

async function unwind(cleanups: Cleanup[], log: Log): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch (error) {
      log.error("shutdown step failed", { error: String(error) });
    }
  }
}

export async function startDaemon(config: DaemonConfig): Promise<StartResult> {
  const { clock, log } = config;
  const cleanups: Cleanup[] = [];
  const fail = async (result: Exclude<StartResult, { kind: "Started" }>) => {
    await unwind(cleanups, log);
    return result;
  };

  // 0. The settings in the environment, parsed once: a bad variable stops the start here,
  // every one of them named, before anything is read or written.
  const parsed = parseDaemonSettings(config.env, config.selfCommand);
  if (parsed.kind === "Invalid") {
    return fail({ kind: "ConfigError", message: settingErrorsMessage(parsed.errors) });
  }
  const { settings } = parsed;

  // 1. The private state dir and the spool, checked before anything in them is read.
  const prepared = prepareLayout(config, log);
  if (prepared.kind === "ConfigError") return fail(prepared);
  const layout = prepared.layout;

  // 1b. Ours alone: a second daemon on this directory stops here (exit 1), before anything
  // is migrated, read or listened on.
  let lock: ReturnType<typeof lockStateDir>;
  try {
    lock = lockStateDir(config.stateDir);
  } catch (error) {
    return fail({ kind: "Failed", message: `state dir ${config.stateDir}: ${String(error)}` });
  }
  if (lock.kind === "Busy") return fail({ kind: "Failed", message: lock.message });
  cleanups.push(lock.release);

  // 1c. A state dir of the old single-directory layout: workspaces and logs move to the
  // spool, nothing is lost (state-migration.ts).
  try {
    const migrated = migrateStateDir(layout, {
      rewriteBackendRecords: (from, to) => migrateBackendRecords(layout, from, to),
    });
    if (migrated.kind === "Refused")
      return fail({ kind: "ConfigError", message: migrated.message });
    if (migrated.kind === "Migrated") {
      log.info("state dir migrated: workloads moved to the spool", {
        stateDir: layout.root,
        spoolDir: layout.spool,
        workloads: migrated.workloads,
        attemptRecords: migrated.attemptRecords,
      });
    }
  } catch (error) {
    return fail({ kind: "Failed", message: `migrating ${layout.root}: ${String(error)}` });
  }

  // 1d. Copies a daemon killed mid-backup left behind (whole copies of the store).
  try {
    const swept = sweepBackupLeftovers(layout.root);
    if (swept.length > 0)
      log.info("removed backup copies left by an interrupted backup", { files: swept });
  } catch (error) {
    return fail({ kind: "Failed", message: `sweeping ${layout.root}: ${String(error)}` });
  }

  // 2. The admin token exists from the first start on, so a client can be pointed at a TCP
  // listener later without restarting anything.
  let adminToken: string;
  try {
    adminToken = loadOrCreateAdminToken(layout.adminToken);
  } catch (error) {
    if (error instanceof AdminTokenError)
      return fail({ kind: "ConfigError", message: error.message });
    throw error;
  }

  // 3. Socket paths: a leftover of a killed daemon is removed, a live daemon is not.
  for (const address of config.listen) {
    if (address.kind !== "unix") continue;
    const state = await clearStaleSocket(address.path);
    switch (state.kind) {
      case "Free":
        break;
      case "StaleRemoved":
        log.info("removed a stale API socket", { path: address.path });
        break;
      case "InUse":
        return fail({ kind: "Failed", message: `${state.message}: is another daemon running?` });
      case "NotASocket":
        return fail({ kind: "ConfigError", message: state.message });
      default: {
        const never: never = state;
        throw new Error(`unhandled socket state ${JSON.stringify(never)}`);
      }
    }
  }

  // 4. The store, on the daemon's local disk.
  if (config.allowNetworkDb !== true) {
    const filesystem = checkDatabaseFilesystem(realpathSync(layout.root));
    if (filesystem.kind !== "Local")
      return fail({ kind: "ConfigError", message: filesystem.message });
  }
  let database: OpenedDatabase;
  try {
    prepareDatabaseFile(layout.database);
    database = openDatabase(layout.database);
  } catch (error) {
    return fail({ kind: "Failed", message: `database ${layout.database}: ${String(error)}` });
  }
  cleanups.push(() => {
    // Everything committed moves into the main file now. close() alone may only mark the
    // connection for closing while statements drizzle prepared still await finalization,
    // which leaves the WAL as the only copy of recent commits until the process exits.
    database.sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)");
    database.close();
  });
  // Checkpoints on a thread of their own, so no commit (a tick's, a POST's) stops to copy
  // the WAL into the database file (adapters/store-sqlite/wal-checkpointer.ts). Stopped before the close above.
  const checkpointer = startWalCheckpointer(database.sqlite, { path: layout.database, log });
  cleanups.push(() => checkpointer.stop());
  const store: StoreDeps = { db: database.db, clock };

  // 5. The working parts, built by the composition: the store's ports, the backend (by
  // name), sessions (opt-in), the preparers and the reconciler. The daemon starts and stops them.
  // Crash tests name the points to die at; read once, injected everywhere.
  const { faults } = settings;
  const identity = config.identity ?? defaultIdentity();
  if (config.allowUnsandboxedBatch === true) {
    // At every start, not once: an opt-out nobody remembers choosing is how it stays on.
    log.warn("started with --allow-unsandboxed-batch", {
      effect:
        identity.kind === "DaemonUid"
          ? "without a verified sandbox, BATCH jobs run as this daemon's uid and can read its state dir, database and admin token"
          : "no effect while the daemon runs as root: jobs run as other uids",
    });
  }
  const metrics = createDaemonMetrics();
  const composed = await composeCore({
    backendName: config.backend,
    layout,
    store,
    faults,
    clusterConfigPath: config.clusterConfigPath,
    selfCommand: config.selfCommand,
    env: config.env,
    settings,
    identity,
    allowUnsandboxedBatch: config.allowUnsandboxedBatch === true,
    clock,
    metrics,
    log,
    ...(config.pacing !== undefined ? { pacing: config.pacing } : {}),
  });
  if (composed.kind === "ConfigError") return fail(composed);
  const { backend, reconciler, sessions, services, admission, jobIdentity, identities } =
    composed.core;
  const maxUploadBytes = config.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES;
  log.info("jobs run as", { identity: jobIdentity });
  if (sessions) {
    const component = sessions;
    cleanups.push(() => component.stop());
  }

  // 6. The reconciler loop.
  const loop = new AbortController();
  const running = reconciler.run(loop.signal);
  cleanups.push(async () => {
    loop.abort();
    await running;
    // Commands still in flight get the drain grace to record their answers; one that does
    // not answer is left to the next start, which resolves it by token (INV-8).
    await withDeadline(reconciler.idle(), config.drainTimeoutMs ?? 5000, () => {});
  });
  // The backend's own background work (the orphan sweep), beside the reconciler.
  for (const service of services) {
    service.start();
    cleanups.push(() => service.stop());
  }

  // The cluster page's hour of scheduler load: the reconciler's running call count, sampled.
  const schedulerCallHistory = createCallRateHistory();
  const sampleCalls = () => {
    const totals = Object.values(reconciler.backendCallRate().totals);
    schedulerCallHistory.record(
      clock.now(),
      totals.reduce((sum, n) => sum + n, 0),
    );
  };
  sampleCalls();
  cleanups.push(every(systemTimers, CALL_SAMPLE_INTERVAL_MS, sampleCalls));

  // 7. The API, once per listener; each listener says how it authenticates.
  const beforeDrain: (() => void)[] = [];
  const app = createApp({
    onDaemonStop: (close) => beforeDrain.push(close),
    schedulerCallHistory,
    store,
    admission,
    backend,
    reconciler,
    clock,
    log,
    logFile: layout.jobLogPath,
    backup: storeBackup(database.sqlite, layout),
    files: {
      spool: layout.spool,
      workspaceDir: layout.workspaceDir,
      claimIdentity: (workspace, subject) => identities.claim(workspace, subject),
      maxUploadBytes,
    },
    version: config.version,
    isolation: {
      unsandboxedBatchAllowed: config.allowUnsandboxedBatch === true,
      jobIdentity,
    },
    spool: watchSpool({ path: layout.spool, lowWaterBytes: config.spoolLowWaterBytes ?? null }),
    metrics,
    processFigures: createProcessFigures(),
    ...(sessions?.service ? { sessions: sessions.service } : {}),
    ...(sessions?.jupyter ? { jupyter: sessions.jupyter } : {}),
    ...(config.principalDefaults ? { principalDefaults: config.principalDefaults } : {}),
    audit: fileAuditLog({ path: layout.auditLog }),
  });
  const servers: Server<unknown>[] = [];
  const listening: string[] = [];
  const drainTimeoutMs = config.drainTimeoutMs ?? 5000;
  cleanups.push(async () => {
    // Websockets (Jupyter's channels) would hold the drain for its whole grace: closed first.
    for (const close of beforeDrain) close();
    // Stop accepting everywhere at once; in-flight requests get a grace period.
    await Promise.all(servers.map((server) => stopServer(server, drainTimeoutMs)));
  });
  // Bun refuses bodies past 128 MiB by default; uploads are capped by the files route
  // (streamed), JSON bodies by the API's own bound (validation.ts).
  const maxRequestBodySize = maxUploadBytes + 1024 * 1024;
  for (const address of config.listen) {
    // Set once the TCP listener exists: the audit log names a request's client address.
    let tcpServer: Server<SocketHandlers> | null = null;
    // Either listener's server, for the websockets of Jupyter's channels.
    let anyServer: Server<SocketHandlers> | null = null;
    const bindings: ApiBindings = {
      upgrade: (request, handlers) => anyServer?.upgrade(request, { data: handlers }) ?? false,
      access: accessFor(address, adminToken),
      ...(config.bodyTimeoutMs !== undefined ? { bodyTimeoutMs: config.bodyTimeoutMs } : {}),
      ...(address.kind === "tcp"
        ? { peerOf: (request: Request) => tcpServer?.requestIP(request)?.address ?? null }
        : {}),
    };
    const fetch = async (request: Request, server: Server<SocketHandlers>) => {
      const response = closeIfBodyUnread(request, await app.fetch(request, bindings));
      // A streamed answer (a followed log, a streaming exec) can stay quiet for minutes while
      // the job or the cell works; Bun's 10 s idle timeout cut such streams (ECONNRESET in
      // `logs --follow`). The routes mark them the way proxies know: X-Accel-Buffering: no.
      if (response.headers.get("X-Accel-Buffering") === "no") server.timeout(request, 0);
      return response;
    };
    try {
      if (address.kind === "unix") {
        // Measured (Bun 1.4.5): the idle timeout does not cut a request still being
        // handled, but it does cut a quiet streamed answer, and `server.timeout(request, 0)`
        // has no effect on a unix socket. No idle timeout here, then: the socket is 0600,
        // only the daemon's own user can hold a connection open. A body that stops arriving
        // is still cut (the API's body deadline, then Connection: close), as on TCP.
        const server = withPrivateSocket(address.path, () =>
          // Bun's types leave idleTimeout off the unix options; the runtime honours it
          // (the logs-live test fails without it).
          Bun.serve({
            unix: address.path,
            fetch,
            idleTimeout: 0,
            maxRequestBodySize,
            websocket: bunWebSocket,
          } as Parameters<typeof Bun.serve>[0]),
        ) as Server<SocketHandlers>;
        anyServer = server;
        servers.push(server);
        cleanups.push(() => removeSocket(address.path));
        listening.push(formatListenAddress(address));
      } else {
        const server = Bun.serve({
          hostname: address.host,
          port: address.port,
          fetch,
          maxRequestBodySize,
          websocket: bunWebSocket,
        });
        tcpServer = server;
        anyServer = server;
        servers.push(server);
        listening.push(
          formatListenAddress({
            kind: "tcp",
            host: address.host,
            port: server.port ?? address.port,
          }),
        );
      }
    } catch (error) {
      return fail({
        kind: "Failed",
        message: `cannot listen on ${formatListenAddress(address)}: ${String(error)}`,
      });
    }
  }

  log.info("daemon started", {
    stateDir: config.stateDir,
    spoolDir: layout.spool,
    backend: backend.name,
    listening,
    sessions: sessions !== null,
  });

  let stopping: Promise<void> | null = null;
  return {
    kind: "Started",
    daemon: {
      layout,
      listening,
      backend,
      stop() {
        stopping ??= (async () => {
          log.info("daemon stopping");
          await unwind(cleanups, log);
          log.info("daemon stopped");
        })();
        return stopping;
      },
    },
  };
}

type PreparedLayout =
  | { readonly kind: "Prepared"; readonly layout: StateLayout }
  | { readonly kind: "ConfigError"; readonly message: string };

/**
 * The state dir is created 0700 when missing, then must pass the ownership rule
 * (state-ownership.ts); the spool is created, checked, and must not overlap it.
 * The pre-split `workloads/` is skipped by the ownership walk: it is job territory, about to
 * move to the spool, and its files may belong to the uid jobs run as.
 */
function prepareLayout(config: DaemonConfig, log: Log): PreparedLayout {
  const uid = config.uid ?? process.geteuid?.() ?? 0;
  const stateDir = config.stateDir;
  try {
    if (!existsSync(stateDir)) mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    const owned = checkStateDirOwnership(stateDir, uid, { skip: [WORKLOADS_DIR] });
    if (owned.kind === "Refused") return { kind: "ConfigError", message: owned.message };
    const tightened = prepareStateDir(stateDir);
    if (tightened.tightenedFrom !== null) {
      log.warn("state dir mode tightened to 700", {
        stateDir,
        was: tightened.tightenedFrom.toString(8),
      });
    }
  } catch (error) {
    return { kind: "ConfigError", message: `state dir ${stateDir}: ${String(error)}` };
  }
  const explicitSpool = config.spoolDir ?? null;
  if (explicitSpool === null && BACKENDS[config.backend]?.requiresSpoolDir === true) {
    return {
      kind: "ConfigError",
      message: `the ${config.backend} backend needs --spool-dir DIR (or $${SPOOL_DIR_ENV}): a directory on the filesystem the nodes share, outside the state dir`,
    };
  }
  const spool = explicitSpool ?? defaultSpoolDir(stateDir);
  try {
    if (!existsSync(spool)) {
      const future = checkFutureDir(spool, uid, "spool dir");
      if (future.kind === "Refused") return { kind: "ConfigError", message: future.message };
    }
    const problem = prepareSpoolDir(spool, uid);
    if (problem !== null) return { kind: "ConfigError", message: problem };
    // As strict as the state dir: whoever may replace the spool or a parent of it decides
    // where a root daemon makes and chowns every workspace (issue 18).
    const ancestors = checkAncestors(realpathSync(spool), uid, "spool dir");
    if (ancestors.kind === "Refused") return { kind: "ConfigError", message: ancestors.message };
    const separation = checkLayoutSeparation(realpathSync(stateDir), realpathSync(spool));
    if (separation.kind === "Overlapping") {
      return { kind: "ConfigError", message: separation.message };
    }
  } catch (error) {
    return { kind: "ConfigError", message: `spool dir ${spool}: ${String(error)}` };
  }
  return { kind: "Prepared", layout: stateLayout(stateDir, spool) };
}

/** 120 points over the cluster page's hour: a minute's burst shows, memory stays small. */
const CALL_SAMPLE_INTERVAL_MS = 30_000;

function accessFor(address: ListenAddress, adminToken: string): Access {
  return address.kind === "unix" ? { kind: "LocalSocket" } : { kind: "Bearer", token: adminToken };
}

/**
 * A request that declared a body its route never read (a GET with Content-Length, a refusal
 * before the read): the runtime would keep the connection to drain that body, and on the
 * unix socket, which has no idle timeout, a client that never sends it holds the connection
 * forever. `Connection: close` ends it once the answer is sent.
 */
function closeIfBodyUnread(request: Request, response: Response): Response {
  if (!declaresBody(request) || request.bodyUsed) return response;
  try {
    response.headers.set("Connection", "close");
    return response;
  } catch {
    // Immutable headers (a Response built elsewhere): copy it.
    const copy = new Response(response.body, response);
    copy.headers.set("Connection", "close");
    return copy;
  }
}

/** Graceful first; connections still open after the grace period are closed. */
async function stopServer(server: Server<unknown>, drainTimeoutMs: number): Promise<void> {
  const graceful = server.stop(false).then(() => "drained" as const);
  const outcome = await withDeadline(graceful, drainTimeoutMs, () => "expired" as const);
  if (outcome === "expired") await server.stop(true);
}

/** The default identity for jobs: a leased uid per workload when root, else its own uid. */
function defaultIdentity(): IdentityChoice {
  const choice = chooseJobIdentity(
    undefined,
    undefined,
    process.getuid?.() ?? -1,
    systemIdentityDatabase(),
  );
  // Nothing given resolves always: the default range, or the daemon's own uid.
  if (choice.kind === "Invalid") throw new Error(choice.message);
  return choice.identity;
}
