/**
 * The daemon's first steps, before anything is read or listened on: the state dir and the
 * spool made and checked, the directory locked, an old layout migrated, leftovers of an
 * interrupted backup swept, the admin token, and the API sockets' paths cleared of a
 * killed daemon's leftovers (never of a live daemon's).
 */
import { existsSync, mkdirSync, realpathSync } from "node:fs";
import {
  checkLayoutSeparation,
  defaultSpoolDir,
  type StateLayout,
  stateLayout,
  WORKLOADS_DIR,
} from "../../core/layout.ts";
import type { Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { sweepUploadStaging } from "../../servers/http/workloads/workspace-files.ts";
import { AdminTokenError, loadOrCreateAdminToken } from "./admin-token.ts";
import { backendNamed, migrateBackendRecords } from "./composition/backends.ts";
import type { Cleanup, DaemonConfig, StartFailure } from "./daemon.ts";
import { sweepRestoreLeftovers } from "./restore-swap.ts";
import { prepareSpoolDir, prepareStateDir, SPOOL_DIR_ENV } from "./state-dir.ts";
import { lockStateDir } from "./state-lock.ts";
import { migrateStateDir } from "./state-migration.ts";
import { checkAncestors, checkFutureDir, checkStateDirOwnership } from "./state-ownership.ts";
import { sweepBackupLeftovers } from "./store-backup.ts";
import { clearStaleSocket } from "./unix-socket.ts";

export type StateReady =
  | { readonly kind: "Ready"; readonly layout: StateLayout; readonly adminToken: string }
  | StartFailure;

/** Steps 1 to 3 of the start; what they hold (the lock) is pushed onto `cleanups`. */
export async function prepareState(
  config: DaemonConfig,
  cleanups: Cleanup[],
  log: Log,
  timers: Timers,
): Promise<StateReady> {
  // 1. The private state dir and the spool, checked before anything in them is read.
  const prepared = prepareLayout(config, log);
  if (prepared.kind === "ConfigError") return prepared;
  const layout = prepared.layout;

  // 1b. Ours alone: a second daemon on this directory stops here (exit 1), before anything
  // is migrated, read or listened on.
  let lock: ReturnType<typeof lockStateDir>;
  try {
    lock = lockStateDir(config.stateDir);
  } catch (error) {
    return { kind: "Failed", message: `state dir ${config.stateDir}: ${String(error)}` };
  }
  if (lock.kind === "Busy") return { kind: "Failed", message: lock.message };
  cleanups.push(lock.release);

  const tidied = tidyStateDir(layout, log);
  if (tidied !== null) return tidied;

  // 2. The admin token exists from the first start on, so a client can be pointed at a TCP
  // listener later without restarting anything.
  let adminToken: string;
  try {
    adminToken = loadOrCreateAdminToken(layout.adminToken);
  } catch (error) {
    if (error instanceof AdminTokenError) return { kind: "ConfigError", message: error.message };
    throw error;
  }

  const sockets = await clearSocketPaths(config, log, timers);
  if (sockets !== null) return sockets;
  return { kind: "Ready", layout, adminToken };
}

/** 1c and 1d: an old layout migrated, an interrupted backup's copies removed. */
function tidyStateDir(layout: StateLayout, log: Log): StartFailure | null {
  // 1c. A state dir of the old single-directory layout: workspaces and logs move to the
  // spool, nothing is lost (state-migration.ts).
  try {
    const migrated = migrateStateDir(layout, {
      rewriteBackendRecords: (from, to) => migrateBackendRecords(layout, from, to),
    });
    if (migrated.kind === "Refused") return { kind: "ConfigError", message: migrated.message };
    if (migrated.kind === "Migrated") {
      log.info("state dir migrated: workloads moved to the spool", {
        stateDir: layout.root,
        spoolDir: layout.spool,
        workloads: migrated.workloads,
        attemptRecords: migrated.attemptRecords,
      });
    }
  } catch (error) {
    return { kind: "Failed", message: `migrating ${layout.root}: ${String(error)}` };
  }

  // 1d. What a kill left half done: copies of a backup (whole copies of the store), the
  // staged copy of a restore, the temporary files of uploads.
  try {
    const swept = sweepBackupLeftovers(layout.root);
    if (swept.length > 0)
      log.info("removed backup copies left by an interrupted backup", { files: swept });
    const restoring = sweepRestoreLeftovers(layout.database);
    if (restoring.length > 0)
      log.info("removed the staged copy of an interrupted restore", { files: restoring });
  } catch (error) {
    return { kind: "Failed", message: `sweeping ${layout.root}: ${String(error)}` };
  }
  try {
    const uploads = sweepUploadStaging(layout.spool);
    if (uploads.length > 0)
      log.info("removed the temporary files of interrupted uploads", { count: uploads.length });
  } catch (error) {
    return { kind: "Failed", message: `sweeping the spool's uploads: ${String(error)}` };
  }
  return null;
}

/** 3. Socket paths: a leftover of a killed daemon is removed, a live daemon is not. */
async function clearSocketPaths(
  config: DaemonConfig,
  log: Log,
  timers: Timers,
): Promise<StartFailure | null> {
  for (const address of config.listen) {
    if (address.kind !== "unix") continue;
    const state = await clearStaleSocket(address.path, timers);
    switch (state.kind) {
      case "Free":
        break;
      case "StaleRemoved":
        log.info("removed a stale API socket", { path: address.path });
        break;
      case "InUse":
        return { kind: "Failed", message: `${state.message}: is another daemon running?` };
      case "NotASocket":
        return { kind: "ConfigError", message: state.message };
      default: {
        const never: never = state;
        throw new Error(`unhandled socket state ${JSON.stringify(never)}`);
      }
    }
  }
  return null;
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
  if (explicitSpool === null && backendNamed(config.backend)?.requiresSpoolDir === true) {
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
