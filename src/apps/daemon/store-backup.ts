/**
 * The daemon's StoreBackup: `VACUUM INTO` a fresh file inside the state dir (0700, the same
 * filesystem, so space and permissions are the daemon's own), named so that a leftover from
 * a crash mid-copy is recognisable (`.backup-*.db`), never mistaken for the store, and swept
 * at the next start.
 */
import { Database } from "bun:sqlite";
import { randomUUID } from "node:crypto";
import {
  closeSync,
  existsSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { join } from "node:path";
import type { StateLayout } from "../../core/layout.ts";
import { errorCode, writeFileDurable } from "../../lib/durable-fs.ts";
import type { StoreBackup } from "../../servers/http/deps.ts";
import { carryIntoCopy } from "./backup-carried.ts";

/** `.backup-<uuid>.db` and the journal SQLite may leave beside it. */
const LEFTOVER = /^\.backup-[0-9a-f-]{36}\.db(-journal)?$/;

export function storeBackup(sqlite: Database, layout: StateLayout): StoreBackup {
  return {
    snapshot() {
      const path = join(layout.root, `.backup-${randomUUID()}.db`);
      // Born 0600: the copy holds every workload's command and environment, and VACUUM INTO
      // would create it with the umask's mode (0644). SQLite accepts an empty file as target.
      closeSync(openSync(path, "wx", 0o600));
      try {
        sqlite.run("VACUUM INTO ?", [path]);
        // The owner ids ride inside the copy: a restore onto a fresh state dir needs them
        // (backup-carried.ts). VACUUM INTO leaves the copy in rollback-journal mode.
        const copy = new Database(path);
        try {
          carryIntoCopy(copy, layout);
        } finally {
          copy.close();
        }
      } catch (error) {
        // A full disk or a closed store: no partial copy of the store stays behind.
        rmSync(path, { force: true });
        rmSync(`${path}-journal`, { force: true });
        throw error;
      }
      return path;
    },
    keepBeside() {
      // Name only what exists (the signing key and the TLS identity exist once the worker
      // gateway was on), or an operator hunts for a file that never was. Not secret: the
      // gateway's certificate (workers pin its fingerprint) and the audit log; secret: what
      // grants access (the admin token, the signing key, the gateway's TLS key).
      const candidates = [
        { name: "gateway-tls.crt", path: layout.gatewayTlsCert, secret: false },
        { name: "audit.log", path: layout.auditLog, secret: false },
        { name: "gateway-tls.key", path: layout.gatewayTlsKey, secret: true },
        { name: "signing-key", path: layout.signingKey, secret: true },
        { name: "admin-token", path: layout.adminToken, secret: true },
      ];
      return candidates.filter((c) => existsSync(c.path));
    },
    lastTakenAt() {
      return readLastBackup(layout.lastBackup);
    },
    recordTaken(atMs) {
      writeFileDurable(layout.lastBackup, `${new Date(atMs).toISOString()}\n`);
    },
  };
}

/** Null when there is none, or it is not a time (never a made-up age). */
function readLastBackup(path: string): number | null {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw error;
  }
  const at = Date.parse(text.trim());
  return Number.isFinite(at) ? at : null;
}

/**
 * Removes the copies a daemon killed mid-backup left in the state dir (each a whole copy of
 * the store). Called at start, under the state dir's lock: no backup of ours is running.
 */
export function sweepBackupLeftovers(stateDir: string): readonly string[] {
  const removed: string[] = [];
  for (const name of readdirSync(stateDir)) {
    if (!LEFTOVER.test(name)) continue;
    const path = join(stateDir, name);
    // A regular file only: never follow or remove something else that took the name.
    if (!lstatSync(path).isFile()) continue;
    rmSync(path, { force: true });
    removed.push(name);
  }
  return removed;
}
