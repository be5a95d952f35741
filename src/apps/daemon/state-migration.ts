/**
 * Moving a state dir of the old layout (everything in one directory, workspaces included)
 * to the split one (layout.ts): the workloads' files go to the spool, the session attempt
 * records the daemon parses come back into the private dir, and job records are told where
 * their files went. Run at start, before anything reads the layout, with the state dir
 * locked; nothing is deleted, only renamed.
 *
 * A job still running keeps going: rename(2) keeps inodes, so its working directory and its
 * open log files follow the move. That is why the spool must be on the same filesystem for
 * the automatic move; across filesystems the admin is told to move it while nothing runs.
 *
 * Crash-safe by order: attempt records first (inside the private dir), then job records
 * (idempotent rewrite), then the one rename that ends the migration. A start that died
 * half-way finds `STATE/workloads` still there and does the rest.
 */
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmdirSync,
  statSync,
} from "node:fs";
import { join } from "node:path";
import { SESSION_ATTEMPT_FILE } from "../../adapters/spool/session-preparer.ts";
import { type StateLayout, WORKLOADS_DIR } from "../../core/layout.ts";
import { errorCode, fsyncDir } from "../../lib/durable-fs.ts";

export type MigrationResult =
  | { readonly kind: "NothingToDo" }
  | { readonly kind: "Migrated"; readonly workloads: number; readonly attemptRecords: number }
  | { readonly kind: "Refused"; readonly message: string };

export interface MigrationHooks {
  /** Rewrites the backends' durable records from the old spool prefix to the new one. */
  readonly rewriteBackendRecords: (fromPrefix: string, toPrefix: string) => void;
}

function listDir(path: string): readonly string[] {
  try {
    return readdirSync(path);
  } catch (error) {
    if (errorCode(error) === "ENOENT" || errorCode(error) === "ENOTDIR") return [];
    throw error;
  }
}

function isRealDir(path: string): boolean {
  try {
    const stat = lstatSync(path);
    return stat.isDirectory();
  } catch {
    return false;
  }
}

/** Old: STATE/workloads/W/allocations/A/session-attempt.json; new: private attempts dir. */
function moveAttemptRecords(oldWorkloads: string, layout: StateLayout): number {
  let moved = 0;
  for (const workloadId of listDir(oldWorkloads)) {
    const allocations = join(oldWorkloads, workloadId, "allocations");
    for (const allocationId of listDir(allocations)) {
      const from = join(allocations, allocationId, SESSION_ATTEMPT_FILE);
      if (!existsSync(from)) continue;
      const toDir = layout.attemptRecordDir(workloadId, allocationId);
      mkdirSync(toDir, { recursive: true, mode: 0o700 });
      // Same filesystem (both in the private dir): a rename. The reader validates it anyway.
      renameSync(from, join(toDir, SESSION_ATTEMPT_FILE));
      fsyncDir(toDir);
      moved += 1;
    }
  }
  return moved;
}

export function migrateStateDir(layout: StateLayout, hooks: MigrationHooks): MigrationResult {
  const oldWorkloads = join(layout.root, WORKLOADS_DIR);
  if (!isRealDir(oldWorkloads)) return { kind: "NothingToDo" };
  const newWorkloads = join(layout.spool, WORKLOADS_DIR);
  mkdirSync(newWorkloads, { recursive: true, mode: 0o711 });
  // Everything that can refuse is checked before anything moves or is rewritten, so a
  // refusal leaves the old layout exactly as it was.
  if (statSync(oldWorkloads).dev !== statSync(newWorkloads).dev) {
    return {
      kind: "Refused",
      message: `the spool ${layout.spool} is on another filesystem than ${oldWorkloads}: stop the daemon's jobs, move ${oldWorkloads} to ${newWorkloads} yourself, then start again`,
    };
  }
  const names = listDir(oldWorkloads);
  for (const name of names) {
    const target = join(newWorkloads, name);
    if (existsSync(target)) {
      return {
        kind: "Refused",
        message: `cannot move ${join(oldWorkloads, name)} to the spool: ${target} already exists; move or remove one of them`,
      };
    }
  }
  const attemptRecords = moveAttemptRecords(oldWorkloads, layout);
  hooks.rewriteBackendRecords(oldWorkloads, newWorkloads);
  for (const name of names) renameSync(join(oldWorkloads, name), join(newWorkloads, name));
  fsyncDir(newWorkloads);
  // rmdir only succeeds on an empty directory: nothing can be lost here.
  rmdirSync(oldWorkloads);
  fsyncDir(layout.root);
  return { kind: "Migrated", workloads: names.length, attemptRecords };
}
