/**
 * One daemon per state directory. Two daemons over one database run two reconcilers: each
 * submits the same PENDING workload, each supervises and cancels the other's jobs. The API
 * socket check does not prevent it, because a second daemon may listen only on TCP or on
 * another socket path. So the directory itself is locked for the daemon's lifetime.
 *
 * The lock is SQLite's own exclusive lock on a small file: an fcntl lock the kernel drops
 * when the process dies, so a daemon killed with SIGKILL leaves nothing behind that blocks
 * the next start (a pid file would, or would be taken over by a recycled pid).
 */
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { prepareDatabaseFile } from "./state-dir.ts";

const STATE_LOCK_FILE = "daemon.lock";

export type StateLockResult =
  | { readonly kind: "Locked"; release(): void }
  /** Another process (or another daemon in this one) holds the directory. */
  | { readonly kind: "Busy"; readonly message: string };

export function lockStateDir(stateDir: string): StateLockResult {
  const path = join(stateDir, STATE_LOCK_FILE);
  prepareDatabaseFile(path);
  const db = new Database(path, { create: true, readwrite: true });
  try {
    // No waiting: a held lock means a live daemon, and it will not let go on its own.
    db.run("PRAGMA busy_timeout = 0");
    // EXCLUSIVE locking mode keeps the lock after the first write until the connection
    // closes, instead of releasing it at COMMIT.
    db.run("PRAGMA locking_mode = EXCLUSIVE");
    db.run("BEGIN EXCLUSIVE");
    db.run("COMMIT");
  } catch (error) {
    db.close();
    if (/locked|busy/i.test(String(error))) {
      return {
        kind: "Busy",
        message: `state dir ${stateDir} is in use by another daemon (${path} is locked)`,
      };
    }
    throw error;
  }
  return {
    kind: "Locked",
    release() {
      db.close();
    },
  };
}
