/**
 * How `openai4s restore` puts a copy in place so that a crash at any instant leaves a whole
 * store at the store's path. The old way renamed the current store aside and then moved the
 * copy in: killed between the two, the state dir had no store at all, and a restore killed
 * mid-copy left `openai4s.db.restoring` (and its journal) for good.
 *
 * Now the steps are, each a point a kill may land on (`copied` before the adjustment):
 *  1. `staged`  the copy is written beside the store as `openai4s.db.restoring`, adjusted,
 *               folded into one file, fsynced and owned like the state dir;
 *  2. `folded`  the current store's WAL is checkpointed into its main file, so that file
 *               alone is the whole store (a stale WAL must never meet the copy);
 *  3. `kept`    the current store gets a second name, `openai4s.db.before-restore-TIME`
 *               (a hard link: the store never leaves its path);
 *  4. `swapped` rename(2) of the staged copy over the store, atomic, and the directory fsynced.
 * Until 4 the old store is in place, after it the new one. What a kill leaves (the staged
 * file, its journal) is removed at the next start of the daemon or of a restore
 * (`sweepRestoreLeftovers`).
 */
import { Database } from "bun:sqlite";
import {
  closeSync,
  copyFileSync,
  existsSync,
  fsyncSync,
  linkSync,
  lstatSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { fsyncDir } from "../../lib/durable-fs.ts";

export type RestoreStep = "copied" | "staged" | "folded" | "kept" | "swapped";

export interface SwapHooks {
  /** Makes the staged copy what restore wants (migrated, adjusted); it must close it. */
  readonly adjust: (staged: string) => void;
  /** Gives the staged file the state dir's mode and owner. */
  readonly own: (staged: string) => void;
  /** Told after each step is done (tests kill the process here). */
  readonly onStep?: (step: RestoreStep) => void;
}

const SIDE_FILES = ["-wal", "-shm", "-journal"] as const;

export function stagedPath(database: string): string {
  return `${database}.restoring`;
}

function fsyncFile(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The store's WAL checkpointed into its main file and gone; throws when it cannot be. */
function foldStore(database: string): void {
  const db = new Database(database);
  try {
    db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  } finally {
    db.close();
  }
  const wal = `${database}-wal`;
  if (existsSync(wal) && statSync(wal).size > 0) {
    throw new Error(`${wal} could not be folded into ${database}; is a daemon still using it?`);
  }
  for (const suffix of ["-wal", "-shm"]) rmSync(`${database}${suffix}`, { force: true });
}

/** Puts `source` at `database`; returns the name the old store is kept under (or null). */
export function swapInCopy(
  source: string,
  database: string,
  stamp: string,
  hooks: SwapHooks,
): string | null {
  const staged = stagedPath(database);
  for (const suffix of ["", ...SIDE_FILES]) rmSync(`${staged}${suffix}`, { force: true });
  copyFileSync(source, staged);
  hooks.onStep?.("copied");
  hooks.adjust(staged);
  for (const suffix of SIDE_FILES) rmSync(`${staged}${suffix}`, { force: true });
  hooks.own(staged);
  fsyncFile(staged);
  hooks.onStep?.("staged");
  let kept: string | null = null;
  if (existsSync(database)) {
    foldStore(database);
    hooks.onStep?.("folded");
    kept = `${database}.before-restore-${stamp}`;
    linkSync(database, kept);
    fsyncDir(dirname(database));
    hooks.onStep?.("kept");
  }
  renameSync(staged, database);
  fsyncDir(dirname(database));
  hooks.onStep?.("swapped");
  return kept;
}

/**
 * Removes what a restore killed before its swap left: the staged copy and SQLite's side
 * files of it. Regular files only. Run under the state dir's lock.
 */
export function sweepRestoreLeftovers(database: string): readonly string[] {
  const dir = dirname(database);
  const prefix = basename(stagedPath(database));
  const removed: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name !== prefix && !SIDE_FILES.some((s) => name === `${prefix}${s}`)) continue;
    const path = join(dir, name);
    if (!lstatSync(path).isFile()) continue;
    rmSync(path, { force: true });
    removed.push(name);
  }
  return removed;
}
