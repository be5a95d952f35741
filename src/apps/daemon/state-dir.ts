/**
 * Where the daemon keeps its state, and making sure it is private. The order is fixed by
 * INTERFACE.md: `--state-dir`, `$OPENAI4S_STATE_DIR`, `$XDG_STATE_HOME/openai4s`,
 * `~/.local/state/openai4s`. The client commands resolve the same way to find the default
 * socket, so a daemon and a client started by one user agree without configuration.
 */
import {
  chmodSync,
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  statSync,
} from "node:fs";
import { resolve } from "node:path";
import { UsageError } from "../../lib/command/command.ts";
import { nonEmpty } from "./state-dir-path.ts";

export {
  type ResolvedStateDir,
  resolveStateDir,
  type StateDirInputs,
  type StateDirSource,
} from "./state-dir-path.ts";

export const SPOOL_DIR_ENV = "OPENAI4S_SPOOL_DIR";

/**
 * The spool: `--spool-dir`, else `$OPENAI4S_SPOOL_DIR`, else null (the backend's default,
 * `STATE_DIR-spool`, for a backend that allows one; see layout.ts for why a sibling).
 */
export function resolveSpoolDir(inputs: {
  readonly flag: string | undefined;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
}): string | null {
  if (inputs.flag === "") throw new UsageError("--spool-dir must not be empty");
  const chosen = nonEmpty(inputs.flag) ?? nonEmpty(inputs.env[SPOOL_DIR_ENV]);
  return chosen === undefined ? null : resolve(inputs.cwd, chosen);
}

/**
 * The spool exists, 0711: jobs (possibly another uid) traverse it to their own workspace,
 * nobody lists the workload ids in it. Must be the daemon's and not writable by others,
 * or another user could swap a workspace or a credential directory under it.
 */
export function prepareSpoolDir(path: string, uid: number): string | null {
  mkdirSync(path, { recursive: true, mode: 0o711 });
  const stat = lstatSync(path);
  if (!stat.isDirectory()) return `spool dir ${path} is not a directory`;
  if (stat.uid !== uid) {
    return `spool dir ${path} is owned by uid ${stat.uid}, not by the daemon's uid ${uid}`;
  }
  if ((stat.mode & 0o022) !== 0) {
    return `spool dir ${path} is writable by group or other (mode ${(stat.mode & 0o7777).toString(8)}): chmod 711 it`;
  }
  if ((stat.mode & 0o777) !== 0o711) chmodSync(path, 0o711);
  return null;
}

/**
 * Creates the directory 0700, or tightens an existing one to 0700: it holds the signing key,
 * the admin token and the API socket, and a group-readable parent would let others at least
 * list workload ids. Returns whether the mode had to be tightened, for the log.
 */
export function prepareStateDir(path: string): { readonly tightenedFrom: number | null } {
  mkdirSync(path, { recursive: true, mode: 0o700 });
  const stat = statSync(path);
  if (!stat.isDirectory()) throw new Error(`state dir ${path} is not a directory`);
  const mode = stat.mode & 0o777;
  if (mode === 0o700) return { tightenedFrom: null };
  chmodSync(path, 0o700);
  return { tightenedFrom: mode };
}

/**
 * The database file is created 0600 before SQLite opens it, and tightened if an earlier run
 * left it looser: SQLite gives its -wal and -shm files the database file's own mode, so this
 * one mode decides all three.
 */
export function prepareDatabaseFile(path: string): void {
  if (!existsSync(path)) closeSync(openSync(path, "a", 0o600));
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    if (existsSync(file) && (statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  }
}
