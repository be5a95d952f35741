/**
 * The daemon, composed: state dir, admin token, store, backend (through the composition
 * root), attempt preparers, the reconciler loop, the sessions seam, and one HTTP listener
 * per `--listen`. `startDaemon` returns once everything listens; `stop()` is the graceful
 * shutdown SIGTERM triggers: stop accepting, let the tick in progress finish, close the
 * database, remove the sockets. A restart then picks every workload up where it was,
 * because nothing that matters lives only in this process.
 */
import type { Server } from "bun";
import { createApp } from "../api/app.ts";
import type { Access, ApiBindings } from "../api/deps.ts";
import type { Clock } from "../clock.ts";
import { type BackendContext, createBackend } from "../composition-root.ts";
import { faultPointsFromEnv } from "../fault-point.ts";
import type { Log } from "../log.ts";
import { batchPreparer } from "../orchestration/batch-preparer.ts";
import { type StateLayout, stateLayout } from "../orchestration/layout.ts";
import type { AllocationBackend } from "../orchestration/ports.ts";
import { preparerByKind } from "../orchestration/preparer-by-kind.ts";
import { bindReconcilerStore, createReconciler } from "../orchestration/reconciler.ts";
import { sessionsDisabledPreparer } from "../orchestration/session/preparer.ts";
import { type OpenedDatabase, openDatabase, type StoreDeps } from "../store/index.ts";
import { AdminTokenError, loadOrCreateAdminToken } from "./admin-token.ts";
import { formatListenAddress, type ListenAddress } from "./listen.ts";
import { composeSessions, type SessionsComponent } from "./sessions.ts";
import { prepareDatabaseFile, prepareStateDir } from "./state-dir.ts";
import { lockStateDir } from "./state-lock.ts";
import { storeBackup } from "./store-backup.ts";
import { clearStaleSocket, removeSocket, withPrivateSocket } from "./unix-socket.ts";

export interface DaemonConfig {
  readonly stateDir: string;
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
  /** Period of the reconciler's level-triggered tick. */
  readonly tickIntervalMs?: number;
  /** How long shutdown waits for in-flight requests before closing their connections. */
  readonly drainTimeoutMs?: number;
}

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

  // 1. The state directory, private.
  try {
    const prepared = prepareStateDir(config.stateDir);
    if (prepared.tightenedFrom !== null) {
      log.warn("state dir mode tightened to 700", {
        stateDir: config.stateDir,
        was: prepared.tightenedFrom.toString(8),
      });
    }
  } catch (error) {
    return fail({ kind: "ConfigError", message: `state dir ${config.stateDir}: ${String(error)}` });
  }
  const layout = stateLayout(config.stateDir);

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

  // 3b. Ours alone: a second daemon on this directory that listens elsewhere (TCP, another
  // socket path) passed the socket check; it stops here (exit 1), before the database.
  let lock: ReturnType<typeof lockStateDir>;
  try {
    lock = lockStateDir(config.stateDir);
  } catch (error) {
    return fail({ kind: "Failed", message: `state dir ${config.stateDir}: ${String(error)}` });
  }
  if (lock.kind === "Busy") return fail({ kind: "Failed", message: lock.message });
  cleanups.push(lock.release);

  // 4. The store.
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
  const store: StoreDeps = { db: database.db, clock };

  // 5. The backend, by name, from the composition root's registry.
  // Crash tests name the points to die at; read once, injected everywhere.
  const faults = faultPointsFromEnv(config.env);
  const context: BackendContext = {
    faults,
    layout,
    clusterConfigPath: config.clusterConfigPath,
    selfCommand: config.selfCommand,
    clock,
    log,
    env: config.env,
  };
  const created = await createBackend(config.backend, context);
  if (created.kind === "ConfigError") return fail(created);
  const backend = created.backend;

  // 6. Sessions (opt-in: the worker gateway only listens when OPENAI4S_WORKER_LISTEN says
  // so). Null means SESSION attempts are refused by the preparer, after admission already
  // refused them for lack of isolation.
  let sessions: SessionsComponent | null;
  try {
    sessions = await composeSessions({
      layout,
      store,
      backend,
      clock,
      log,
      env: config.env,
      selfCommand: config.selfCommand,
    });
  } catch (error) {
    return fail({ kind: "ConfigError", message: `sessions: ${String(error)}` });
  }
  if (sessions) {
    const component = sessions;
    cleanups.push(() => component.stop());
  }

  // 7. The reconciler loop.
  const preparer = preparerByKind({
    BATCH: batchPreparer({ layout }),
    SESSION:
      sessions?.preparer ??
      sessionsDisabledPreparer("sessions are not enabled on this daemon (no worker gateway)"),
  });
  const reconciler = createReconciler({
    store: bindReconcilerStore({ db: database.db, clock }),
    backend,
    preparer,
    clock,
    log,
    faultPoint: (point) => faults.hit(point),
    ...(sessions?.barrierHooks ? { barrierHooks: sessions.barrierHooks } : {}),
    ...(config.tickIntervalMs !== undefined ? { tickIntervalMs: config.tickIntervalMs } : {}),
  });
  const loop = new AbortController();
  const running = reconciler.run(loop.signal);
  cleanups.push(async () => {
    loop.abort();
    await running;
  });
  sessions?.attachReconciler?.(reconciler);

  // 8. The API, once per listener; each listener says how it authenticates.
  const app = createApp({
    store,
    backend,
    reconciler,
    clock,
    log,
    logFile: layout.logFile,
    backup: storeBackup(database.sqlite, layout),
    version: config.version,
    ...(sessions?.service ? { sessions: sessions.service } : {}),
  });
  const servers: Server<unknown>[] = [];
  const listening: string[] = [];
  const drainTimeoutMs = config.drainTimeoutMs ?? 5000;
  cleanups.push(async () => {
    // Stop accepting everywhere at once; in-flight requests get a grace period.
    await Promise.all(servers.map((server) => stopServer(server, drainTimeoutMs)));
  });
  for (const address of config.listen) {
    const bindings: ApiBindings = {
      access: accessFor(address, adminToken),
    };
    const fetch = (request: Request) => app.fetch(request, bindings);
    try {
      if (address.kind === "unix") {
        // Measured (Bun 1.4.5): the idle timeout does not cut a request still being
        // handled, so a long exec or step needs no setting here.
        const server = withPrivateSocket(address.path, () =>
          Bun.serve({ unix: address.path, fetch }),
        );
        servers.push(server);
        cleanups.push(() => removeSocket(address.path));
        listening.push(formatListenAddress(address));
      } else {
        const server = Bun.serve({
          hostname: address.host,
          port: address.port,
          fetch,
        });
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

function accessFor(address: ListenAddress, adminToken: string): Access {
  return address.kind === "unix" ? { kind: "LocalSocket" } : { kind: "Bearer", token: adminToken };
}

/** Graceful first; connections still open after the grace period are closed. */
async function stopServer(server: Server<unknown>, drainTimeoutMs: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const graceful = server.stop(false);
  const expired = new Promise<"expired">((resolve) => {
    timer = setTimeout(() => resolve("expired"), drainTimeoutMs);
  });
  const outcome = await Promise.race([graceful.then(() => "drained" as const), expired]);
  clearTimeout(timer);
  if (outcome === "expired") await server.stop(true);
}
