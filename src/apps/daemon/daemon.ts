/**
 * The daemon: state dir, admin token, store, the working parts the composition builds
 * (apps/daemon/composition/core.ts: backend, sessions, preparers, reconciler), the reconciler loop, and
 * one HTTP listener per `--listen`. `startDaemon` returns once everything listens; `stop()` is the graceful
 * shutdown SIGTERM triggers: stop accepting, let the tick in progress finish, close the
 * database, remove the sockets. A restart then picks every workload up where it was,
 * because nothing that matters lives only in this process.
 *
 * The steps, in order, each pushing what it started onto one undo stack: the settings, the
 * state (start-state.ts: dirs, lock, migration, admin token, socket paths), the store, the
 * working parts and their loops, the API's listeners (api-listeners.ts).
 *
 * Over 400 lines because the start is one numbered sequence with its config type; the site's
 * identity (issue 32) took it just past: its parts live in composition/site-identity.ts.
 */

import { realpathSync } from "node:fs";
import { systemAccounts } from "../../adapters/accounts-nss/getent-accounts.ts";
import { chooseJobIdentity, type IdentityChoice } from "../../adapters/isolation-bwrap/run-as.ts";
import { createDaemonMetrics, type DaemonMetrics } from "../../adapters/metrics/daemon-metrics.ts";
import { createProcessFigures } from "../../adapters/metrics/process-figures.ts";
import {
  type OpenedDatabase,
  openDatabase,
  type StoreDeps,
  startWalCheckpointer,
} from "../../adapters/store-sqlite/index.ts";
import { checkDatabaseFilesystem } from "../../adapters/store-sqlite/network-fs.ts";
import { bindActivityRecorder } from "../../adapters/store-sqlite/stores/activity-recorder.ts";
import type { StateLayout } from "../../core/layout.ts";
import type { AllocationBackend } from "../../core/ports/allocation-backend.ts";
import type { SiteIdentity } from "../../core/ports/site-identity.ts";
import type { PrincipalLimits } from "../../core/principals.ts";
import { activityRenewMs, createPresence } from "../../core/session/presence.ts";
import { type Clock, every, systemClock, systemTimers, withDeadline } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { createApp } from "../../servers/http/app.ts";
import { createCallRateHistory } from "../../servers/http/ui/call-rate-history.ts";
import { startListeners } from "./api-listeners.ts";
import { reportingAuditFailures } from "./audit-failures.ts";
import { fileAuditLog } from "./audit-log.ts";
import { withListenHosts } from "./browser-settings.ts";
import { composeCore } from "./composition/index.ts";
import { composeSiteIdentity } from "./composition/site-identity.ts";
import { type DaemonSettings, parseDaemonSettings, settingErrorsMessage } from "./config.ts";
import type { ListenAddress, ListenTlsPaths } from "./listen.ts";
import type { SiteIdentityOptions } from "./site-identity-flags.ts";
import { watchSpool, watchStateDir } from "./spool-watch.ts";
import { prepareState } from "./start-state.ts";
import { prepareDatabaseFile } from "./state-dir.ts";
import { storeBackup } from "./store-backup.ts";

export interface DaemonConfig {
  /** The private state dir (layout.ts). */
  readonly stateDir: string;
  /** `--spool-dir`/`$OPENAI4S_SPOOL_DIR`; null for the backend's default (`STATE_DIR-spool`). */
  readonly spoolDir?: string | null;
  /** `--allow-network-db`: open the database even on NFS, Lustre, GPFS, CIFS... */
  readonly allowNetworkDb?: boolean;
  /** `--spool-low-water`; null or absent: 5 % of the spool's filesystem, at most 1 GiB. */
  readonly spoolLowWaterBytes?: number | null;
  /** `--state-low-water`; null or absent: 5 % of the state dir's filesystem, at most 256 MiB. */
  readonly stateLowWaterBytes?: number | null;
  /** The uid the state dir must belong to; default the process's effective uid. */
  readonly uid?: number;
  /** Already validated (loopback or --allow-remote) by the caller. */
  readonly listen: readonly ListenAddress[];
  /** TLS on the TCP listeners (`--tls-cert`, `--tls-key`); null or absent: plain HTTP. */
  readonly listenTls?: ListenTlsPaths | null;
  readonly backend: string;
  readonly clusterConfigPath: string | null;
  readonly version: string;
  /** The daemon's environment: what its children inherit, and where its settings come from. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The settings, already parsed from `env` (serve parses them with its flags); absent: parsed here. */
  readonly settings?: DaemonSettings;
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
  /** Sign-in through the site (`serve --oidc-*`, `--munge*`, `--users-socket`). */
  readonly siteIdentity?: SiteIdentityOptions;
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

export type StartFailure =
  /** Something the admin must fix (exit 2). */
  | { readonly kind: "ConfigError"; readonly message: string }
  /** The environment refused (exit 1): a socket in use, a port taken. */
  | { readonly kind: "Failed"; readonly message: string };

export type StartResult =
  | { readonly kind: "Started"; readonly daemon: RunningDaemon }
  | StartFailure;

/** Undo stack: everything started so far is stopped in reverse if a later step fails. */
export type Cleanup = () => Promise<void> | void;

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
  const { log } = config;
  const cleanups: Cleanup[] = [];
  const fail = async (result: StartFailure) => {
    await unwind(cleanups, log);
    return result;
  };

  // 0. The settings in the environment, parsed once: a bad variable stops the start here,
  // every one of them named, before anything is read or written.
  const parsed =
    config.settings !== undefined
      ? { kind: "Parsed" as const, settings: config.settings }
      : parseDaemonSettings(config.env, config.selfCommand);
  if (parsed.kind === "Invalid") {
    return fail({ kind: "ConfigError", message: settingErrorsMessage(parsed.errors) });
  }
  const { settings } = parsed;

  // 1-3. The state dir and spool, the lock, the migration, the admin token, the socket paths.
  const state = await prepareState(config, cleanups, log, systemTimers);
  if (state.kind !== "Ready") return fail(state);
  const { layout, adminToken } = state;

  // 4. The store, on the daemon's local disk.
  const opened = openStore(config, layout, cleanups);
  if (opened.kind !== "Opened") return fail(opened);
  const { database, store } = opened;

  // 5 and 6. The working parts and their loops.
  const metrics = createDaemonMetrics();
  const composed = await startWorkingParts({ config, settings, layout, store, metrics }, cleanups);
  if (composed.kind !== "Composed") return fail(composed);
  const { backend, sessions } = composed.core;
  const maxUploadBytes = config.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES;

  // 7. The API, once per listener; each listener says how it authenticates.
  const siteIdentity = composeSiteIdentity(config.siteIdentity, config.env, config.clock);
  if (siteIdentity !== null && "error" in siteIdentity) {
    return fail({ kind: "ConfigError", message: siteIdentity.error });
  }
  const beforeDrain: (() => void)[] = [];
  const app = buildApp(
    { config, settings, layout, store, database, metrics, maxUploadBytes, beforeDrain, cleanups },
    composed.core,
    siteIdentity,
  );
  const listeners = startListeners(
    {
      listen: config.listen,
      tls: config.listenTls ?? null,
      adminToken,
      app,
      beforeDrain,
      bodyTimeoutMs: config.bodyTimeoutMs,
      usersSocket: config.siteIdentity?.usersSocket ?? null,
      drainTimeoutMs: config.drainTimeoutMs ?? 5000,
      maxUploadBytes,
    },
    cleanups,
  );
  if (listeners.kind !== "Listening") return fail(listeners);
  const { listening } = listeners;

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

type OpenedStore =
  | { readonly kind: "Opened"; readonly database: OpenedDatabase; readonly store: StoreDeps }
  | StartFailure;

/** 4. The database, refused on a network filesystem unless allowed, with its checkpointer. */
function openStore(config: DaemonConfig, layout: StateLayout, cleanups: Cleanup[]): OpenedStore {
  const { clock, log } = config;
  if (config.allowNetworkDb !== true) {
    const filesystem = checkDatabaseFilesystem(realpathSync(layout.root));
    if (filesystem.kind !== "Local") return { kind: "ConfigError", message: filesystem.message };
  }
  let database: OpenedDatabase;
  try {
    prepareDatabaseFile(layout.database);
    database = openDatabase(layout.database);
  } catch (error) {
    return { kind: "Failed", message: `database ${layout.database}: ${String(error)}` };
  }
  const opened = database;
  cleanups.push(() => {
    // Everything committed moves into the main file now. close() alone may only mark the
    // connection for closing while statements drizzle prepared still await finalization,
    // which leaves the WAL as the only copy of recent commits until the process exits.
    opened.sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)");
    opened.close();
  });
  // Checkpoints on a thread of their own, so no commit (a tick's, a POST's) stops to copy
  // the WAL into the database file (adapters/store-sqlite/wal-checkpointer.ts). Stopped before the close above.
  const checkpointer = startWalCheckpointer(database.sqlite, { path: layout.database, log });
  cleanups.push(() => checkpointer.stop());
  return { kind: "Opened", database, store: { db: database.db, clock } };
}

type Composed = Extract<Awaited<ReturnType<typeof composeCore>>, { kind: "Composed" }>["core"];

interface WorkingPartsInputs {
  readonly config: DaemonConfig;
  readonly settings: DaemonSettings;
  readonly layout: StateLayout;
  readonly store: StoreDeps;
  readonly metrics: DaemonMetrics;
}

/**
 * 5. The working parts, built by the composition: the store's ports, the backend (by name),
 * sessions (opt-in), the preparers and the reconciler. 6. The reconciler loop and the
 * backend's background services, started; each stop on the undo stack.
 */
async function startWorkingParts(
  inputs: WorkingPartsInputs,
  cleanups: Cleanup[],
): Promise<{ readonly kind: "Composed"; readonly core: Composed } | StartFailure> {
  const { config, settings, layout, store, metrics } = inputs;
  const { clock, log } = config;
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
  if (composed.kind === "ConfigError") return composed;
  log.info("jobs run as", { identity: composed.core.jobIdentity });
  startLoops(composed.core, config.drainTimeoutMs ?? 5000, cleanups);
  return composed;
}

function startLoops(core: Composed, drainTimeoutMs: number, cleanups: Cleanup[]): void {
  const { reconciler, sessions, services } = core;
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
    await withDeadline(reconciler.idle(), drainTimeoutMs, () => {});
    reconciler.close();
  });
  // The backend's own background work (the orphan sweep), beside the reconciler.
  for (const service of services) {
    service.start();
    cleanups.push(() => service.stop());
  }
}

interface AppInputs {
  readonly config: DaemonConfig;
  readonly layout: StateLayout;
  readonly store: StoreDeps;
  readonly database: OpenedDatabase;
  readonly metrics: DaemonMetrics;
  readonly maxUploadBytes: number;
  /** Filled by the API with what must close before the listeners drain. */
  readonly beforeDrain: (() => void)[];
  readonly cleanups: Cleanup[];
  readonly settings: DaemonSettings;
}

/** The Hono app every listener serves, with the cluster page's sampled call history. */
function buildApp(inputs: AppInputs, core: Composed, siteIdentity: SiteIdentity | null) {
  const { config, layout, store, database, metrics, maxUploadBytes, beforeDrain } = inputs;
  const { clock, log } = config;
  const { backend, reconciler, sessions, admission, jobIdentity, identities } = core;
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
  inputs.cleanups.push(every(systemTimers, CALL_SAMPLE_INTERVAL_MS, sampleCalls));
  const backup = storeBackup(database.sqlite, layout);
  // The last backup's age from its record, so /metrics has it from the first scrape on.
  metrics.lastBackupAt = backup.lastTakenAt();
  return createApp({
    onDaemonStop: (close) => beforeDrain.push(close),
    schedulerCallHistory,
    store,
    admission,
    backend,
    reconciler,
    clock,
    timers: systemTimers,
    log,
    logFile: layout.jobLogPath,
    backup,
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
    stateDirSpace: watchStateDir(layout.root, config.stateLowWaterBytes ?? null),
    metrics,
    processFigures: createProcessFigures(),
    presence: createPresence({
      activity: bindActivityRecorder(store),
      log,
      timers: systemTimers,
      // One renewal period for every door, from the sessions' default lease.
      renewMs: activityRenewMs(inputs.settings.sessions.lease),
    }),
    ...(sessions?.service ? { sessions: sessions.service } : {}),
    ...(sessions?.jupyter ? { jupyter: sessions.jupyter } : {}),
    ...(config.principalDefaults ? { principalDefaults: config.principalDefaults } : {}),
    audit: reportingAuditFailures(fileAuditLog({ path: layout.auditLog }), log),
    accounts: core.accounts,
    // Beyond loopback (browser-settings.ts): the names the daemon listens on.
    browserGuard: withListenHosts(inputs.settings.browser, config.listen),
    ...(siteIdentity !== null ? { siteIdentity } : {}),
  });
}

/** 120 points over the cluster page's hour: a minute's burst shows, memory stays small. */
const CALL_SAMPLE_INTERVAL_MS = 30_000;

/** The default identity for jobs: a leased uid per workload when root, else its own uid. */
function defaultIdentity(): IdentityChoice {
  const choice = chooseJobIdentity(
    undefined,
    undefined,
    process.getuid?.() ?? -1,
    systemAccounts(systemClock),
  );
  // Nothing given resolves always: the default range, or the daemon's own uid.
  if (choice.kind === "Invalid") throw new Error(choice.message);
  return choice.identity;
}
