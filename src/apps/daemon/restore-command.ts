/**
 * `openai4s restore BACKUP`: puts a copy taken by `openai4s backup` in place of a stopped
 * daemon's store, so that the daemon started on it converges without running a job twice.
 *
 * A copy is older than the world. Two things happened after it that it cannot know:
 * - An attempt live in the copy may have ended and been acknowledged since, after which a
 *   backend may forget it. The restored daemon then finds it gone (LOST), and with attempts
 *   left it would submit it again: a job run twice. So in-flight attempts of the copy get no
 *   automatic retry (max attempts = the attempt they are on). Attempts that still run are
 *   observed as usual; attempts minted but unanswered are found by their token (INV-8).
 * - A workload waiting in the copy (PENDING) may have been submitted by the old daemon
 *   after the copy, under a token the copy never saw. Nothing can find that job by token.
 *   These workloads are listed; `--cancel-pending` cancels them instead of resubmitting.
 */

import { Database } from "bun:sqlite";
import { chmodSync, chownSync, closeSync, existsSync, openSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { resolve } from "node:path";
import { openDatabase, requestStop } from "../../adapters/store-sqlite/index.ts";
import { type StateLayout, stateLayout } from "../../core/layout.ts";
import { TERMINAL_PHASES } from "../../core/models.ts";
import { systemClock } from "../../lib/clock.ts";
import type { Command, CommandIo } from "../../lib/command/command.ts";
import { UsageError } from "../../lib/command/command.ts";
import { parseStrict } from "../../lib/command/parse-args.ts";
import { errorCode } from "../../lib/durable-fs.ts";
import { type CarriedOutcome, restoreCarried } from "./backup-carried.ts";
import { type RestoreStep, swapInCopy, sweepRestoreLeftovers } from "./restore-swap.ts";
import { unknownJobLines, unknownJobs } from "./restore-unknown-jobs.ts";
import { prepareStateDir, resolveStateDir } from "./state-dir.ts";
import { lockStateDir } from "./state-lock.ts";

const HELP = `Usage: openai4s restore BACKUP [--state-dir DIR] [--cancel-pending] [--cancel-unknown-jobs]

Put BACKUP (a copy taken by \`openai4s backup\`) in place of the store of a STOPPED daemon.
The current store is kept beside it as openai4s.db.before-restore-TIME (a second name:
a whole store stays at the store's path at every instant, and a restore killed part way
leaves only openai4s.db.restoring, removed at the next start). The restored file is 0600
and owned by the state dir's owner (when run as root), so the daemon's account can open
it. The backends' owner ids carried in the copy are put back (a differing one is kept
aside), so a cluster's jobs started after the copy are still recognised as this
daemon's. Onto a fresh state dir, also put back the files \`openai4s backup\` named: the
gateway's TLS certificate and key, the audit log, the signing-key and admin-token.

What happened after the copy was taken is not in it. So that no job runs twice:
  - attempts that were live in the copy are not retried automatically;
  - workloads that were waiting to be submitted are listed: the old daemon may have
    submitted them after the copy. Check the backend for their jobs, or pass
    --cancel-pending to cancel them (resubmit what you still need);
  - local jobs still running that the copy does not know (started after it) are listed:
    the restored daemon never adopts them, so they would run to their end unmanaged.
    --cancel-unknown-jobs stops them. (On a cluster the daemon's orphan sweep reports them.)
    The records of such jobs once ended are moved to backends/local/unknown-at-restore-TIME
    in the state dir, so the daemon does not warn about them at every start.

Options:
  --state-dir DIR     The daemon's state dir (else $OPENAI4S_STATE_DIR, else the default).
  --cancel-pending    Cancel the waiting workloads instead of submitting them again.
  --cancel-unknown-jobs
                      Stop the running local jobs the copy does not know.
  -h, --help          Show this help.
Exit codes: 0 restored, 1 could not restore (daemon running, bad copy), 2 usage error.
`;

const TERMINAL_SQL = TERMINAL_PHASES.map((p) => `'${p}'`).join(", ");

/** "ok", or what is wrong; a file that is not a database at all is a finding, not a crash. */
function integrity(path: string): string {
  let db: Database;
  try {
    db = new Database(path, { readonly: true });
  } catch (error) {
    return String(error);
  }
  try {
    const rows = db.query("PRAGMA integrity_check").all() as Record<string, string>[];
    return rows.map((r) => Object.values(r)[0]).join("; ");
  } catch (error) {
    return String(error);
  } finally {
    db.close();
  }
}

/** Null when `path` can be read; else why not, "permission denied" named as such. */
function unreadable(path: string): string | null {
  try {
    closeSync(openSync(path, "r"));
    return null;
  } catch (error) {
    const code = errorCode(error);
    if (code !== "EACCES" && code !== "EPERM") return String(error);
    // SQLite says only "unable to open database file": an admin chasing corruption when
    // the backup is merely root's 0600 file (issue 19).
    const s = statSync(path);
    return `permission denied: cannot read it as uid ${process.getuid?.()} (it belongs to uid ${s.uid}, mode ${(s.mode & 0o777).toString(8).padStart(4, "0")}); run restore as a user who can read it, or give the daemon's user read access`;
  }
}

/**
 * The restored file as the daemon will want it: 0600 and owned by the state dir's owner. Run
 * as root for a daemon with a service account, a root-owned copy made the next start exit 2
 * (a file in the state dir belonging to another user), a restart loop under systemd.
 */
function ownLikeStateDir(file: string, stateDir: string): void {
  chmodSync(file, 0o600);
  chownLikeStateDir(file, stateDir);
}

/** Owned by the state dir's owner, its mode untouched (a file or a directory). */
function chownLikeStateDir(file: string, stateDir: string): void {
  const owner = statSync(stateDir);
  const self = statSync(file);
  if (process.getuid?.() === 0 && (self.uid !== owner.uid || self.gid !== owner.gid)) {
    chownSync(file, owner.uid, owner.gid);
  }
}

interface Adjusted {
  /** Attempts live in the copy (minted, not ended): each is observed, none retried. */
  readonly live: number;
  /** Of those, the ones that had automatic retries left, now taken away. */
  readonly noRetry: number;
  readonly carried: CarriedOutcome;
  readonly waiting: readonly string[];
  /** Every submission token the copy knows. */
  readonly tokens: ReadonlySet<string>;
}

/** The rules above, applied to the copy before it goes into place (migrated first). */
function adjust(
  path: string,
  cancelPending: boolean,
  carry: (sqlite: Database) => CarriedOutcome,
): Adjusted {
  const opened = openDatabase(path);
  try {
    const sqlite = opened.sqlite;
    const carried = carry(sqlite);
    // Counted apart from the retries taken: a live attempt on its last try (max attempts 1)
    // is as live, and the summary said "0" while one ran (issue 33).
    const live = (
      sqlite
        .query(
          `SELECT count(*) AS n FROM workloads
           WHERE phase NOT IN (${TERMINAL_SQL}) AND phase != 'PENDING' AND execution_epoch > 0`,
        )
        .get() as { n: number }
    ).n;
    const noRetry = sqlite
      .query(
        `UPDATE workloads SET max_attempts = execution_epoch
         WHERE phase NOT IN (${TERMINAL_SQL}) AND phase != 'PENDING'
           AND execution_epoch > 0 AND max_attempts > execution_epoch`,
      )
      .run().changes;
    const waiting = (
      sqlite
        .query("SELECT id FROM workloads WHERE phase = 'PENDING' ORDER BY created_at, id")
        .all() as { id: string }[]
    ).map((r) => r.id);
    if (cancelPending) {
      const store = { db: opened.db, clock: systemClock };
      for (const id of waiting) {
        requestStop(
          store,
          id,
          "USER_CANCELLED",
          "cancelled on restore: it may have run after the copy",
        );
      }
    }
    const tokens = new Set(
      (sqlite.query("SELECT token FROM allocations").all() as { token: string }[]).map(
        (r) => r.token,
      ),
    );
    // Everything into the main file: the copy goes into place as one file.
    sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)");
    return { live, noRetry, carried, waiting, tokens };
  } finally {
    opened.close();
  }
}

/**
 * The checked backup made the state dir's database: staged beside it, adjusted, owned like
 * the state dir, and renamed over it, the store it replaces kept with a timestamp; a whole
 * store stays at the path at every instant (restore-swap.ts).
 */
export function swapIn(
  source: string,
  stateDir: string,
  cancelPending: boolean,
  onStep?: (step: RestoreStep) => void,
): { readonly layout: StateLayout; readonly adjusted: Adjusted; readonly stamp: string } {
  const layout = stateLayout(stateDir);
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  let adjusted: Adjusted | null = null;
  swapInCopy(source, layout.database, stamp, {
    adjust: (staged) => {
      adjusted = adjust(staged, cancelPending, (sqlite) =>
        restoreCarried(sqlite, layout, stamp, (path) => chownLikeStateDir(path, stateDir)),
      );
    },
    own: (staged) => ownLikeStateDir(staged, stateDir),
    ...(onStep === undefined ? {} : { onStep }),
  });
  if (adjusted === null) throw new Error("restore: the copy was never adjusted");
  return { layout, adjusted, stamp };
}

async function restore(args: readonly string[], io: CommandIo): Promise<number> {
  const parsed = parseStrict("restore", args, {
    "state-dir": { type: "string" },
    "cancel-pending": { type: "boolean" },
    "cancel-unknown-jobs": { type: "boolean" },
    help: { type: "boolean", short: "h" },
  });
  if (parsed.values.help) {
    io.stdout(HELP);
    return 0;
  }
  const [backup, ...extra] = parsed.positionals;
  if (backup === undefined) throw new UsageError("restore: BACKUP is required");
  if (extra.length > 0) throw new UsageError(`restore: unexpected argument "${extra[0]}"`);
  const cwd = process.cwd();
  const source = resolve(cwd, backup);
  if (!existsSync(source)) throw new UsageError(`restore: ${backup} does not exist`);
  if (existsSync(`${source}-wal`)) {
    // Its newest commits may be in the WAL, which a copy of the main file would drop.
    io.stderr(
      `openai4s restore: ${backup}-wal exists: that is a live database, not a backup; take one with \`openai4s backup\`\n`,
    );
    return 1;
  }
  const stateDir = resolveStateDir({
    flag: parsed.values["state-dir"],
    env: io.env,
    homeDir: homedir(),
    cwd: () => cwd,
  }).path;
  prepareStateDir(stateDir);
  const lock = lockStateDir(stateDir);
  if (lock.kind === "Busy") {
    io.stderr(`openai4s restore: ${lock.message}; stop the daemon first\n`);
    return 1;
  }
  try {
    // What an earlier restore killed before its swap left (restore-swap.ts).
    sweepRestoreLeftovers(stateLayout(stateDir).database);
    const denied = unreadable(source);
    if (denied !== null) {
      io.stderr(`openai4s restore: ${backup}: ${denied}\n`);
      return 1;
    }
    const check = integrity(source);
    if (check !== "ok") {
      io.stderr(`openai4s restore: ${backup} fails integrity_check: ${check}\n`);
      return 1;
    }
    const { layout, adjusted, stamp } = swapIn(
      source,
      stateDir,
      parsed.values["cancel-pending"] === true,
    );
    const cancelUnknown = parsed.values["cancel-unknown-jobs"] === true;
    const jobs = await unknownJobs(layout, adjusted.tokens, {
      cancel: cancelUnknown,
      stamp,
      clock: systemClock,
    });
    io.stdout(
      [
        `restored ${source} into ${layout.database}`,
        ...adjustedLines(adjusted, parsed.values["cancel-pending"] === true),
        ...unknownJobLines(jobs, cancelUnknown),
        "",
      ].join("\n"),
    );
    for (const problem of jobs.problems) io.stderr(`openai4s restore: cannot stop ${problem}\n`);
    return jobs.problems.length === 0 ? 0 : 1;
  } finally {
    lock.release();
  }
}

function adjustedLines(adjusted: Adjusted, cancelledPending: boolean): string[] {
  const { written, keptAside } = adjusted.carried;
  return [
    ...written.map((path) => `${path} put back from the copy`),
    ...keptAside.map((k) => `  (the state dir's own ${k.path} differed: kept as ${k.as})`),
    `attempts live in the copy: ${adjusted.live} (observed as usual, none retried automatically; ${adjusted.noRetry} had retries left)`,
    adjusted.waiting.length === 0
      ? "no workload was waiting to be submitted"
      : `${adjusted.waiting.length} workload(s) were waiting to be submitted${
          cancelledPending
            ? " and are cancelled"
            : " (check the backend for their jobs before starting the daemon, or restore again with --cancel-pending)"
        }:`,
    ...adjusted.waiting.map((id) => `  ${id}`),
  ];
}

export const restoreCommand: Command = {
  name: "restore",
  summary: "Put a backup in place of a stopped daemon's store",
  run: restore,
};
