/**
 * State-dir files a backup carries inside the copy itself, because a restore onto a fresh
 * state dir cannot work without them and they are no secret: each backend's owner id
 * (`backends/NAME/owner-id`). A cluster's jobs carry it in their comment; a restore that made
 * a new one let a job submitted after the backup run on unseen, the orphan check reporting
 * nothing (issue 33).
 *
 * The snapshot writes them into a table of the copy (`CARRIED_TABLE`); the restore writes
 * them back into the state dir (keeping a differing one aside) and drops the table before the
 * copy goes into place. Secrets (the admin token, the signing key, the TLS key) never go in
 * the copy: `keepBeside` names them.
 */
import type { Database } from "bun:sqlite";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import type { StateLayout } from "../../core/layout.ts";
import { writeFileDurable } from "../../lib/durable-fs.ts";

export const CARRIED_TABLE = "openai4s_backup_carried_files";

const OWNER_FILE = "owner-id";
/** An owner id file is one short line; anything larger was not written by us. */
const MAX_CARRIED_BYTES = 256;

/** `backends/NAME/owner-id` for each backend that made one, relative to the state dir. */
function ownerIdFiles(layout: StateLayout): readonly string[] {
  const backends = dirname(layout.backendDir("x"));
  if (!existsSync(backends)) return [];
  return readdirSync(backends)
    .map((name) => join(backends, name, OWNER_FILE))
    .filter((path) => {
      try {
        const st = lstatSync(path);
        return st.isFile() && st.size <= MAX_CARRIED_BYTES;
      } catch {
        return false;
      }
    })
    .map((path) => relative(layout.root, path));
}

/** Writes the carried files into the copy at `copyPath` (opened by the caller as `copy`). */
export function carryIntoCopy(copy: Database, layout: StateLayout): number {
  copy.run(`CREATE TABLE ${CARRIED_TABLE} (path TEXT PRIMARY KEY, content TEXT NOT NULL)`);
  const insert = copy.prepare(`INSERT INTO ${CARRIED_TABLE} (path, content) VALUES (?, ?)`);
  const files = ownerIdFiles(layout);
  for (const path of files) insert.run(path, readFileSync(join(layout.root, path), "utf8"));
  return files.length;
}

export interface CarriedOutcome {
  /** Written into the state dir (it had none, or a different one, kept aside). */
  readonly written: readonly string[];
  /** A differing file that was there, and the name it is kept under. */
  readonly keptAside: readonly { readonly path: string; readonly as: string }[];
}

/**
 * Takes the carried files out of a staged copy (the table is dropped) into the state dir.
 * Only names of the owner-id shape under `backends/` are accepted: the copy is a file the
 * admin handed us, and a path in it must not write elsewhere.
 */
export function restoreCarried(
  staged: Database,
  layout: StateLayout,
  stamp: string,
  /** Gives a written file (and a directory made for it) the state dir's owner. */
  own: (path: string) => void,
): CarriedOutcome {
  const exists = staged
    .query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
    .get(CARRIED_TABLE);
  if (exists === null) return { written: [], keptAside: [] };
  const rows = staged.query(`SELECT path, content FROM ${CARRIED_TABLE}`).all() as {
    path: string;
    content: string;
  }[];
  const written: string[] = [];
  const keptAside: { path: string; as: string }[] = [];
  for (const row of rows) {
    if (!/^backends\/[a-z0-9_-]+\/owner-id$/.test(row.path)) continue;
    const target = join(layout.root, row.path);
    const current = existsSync(target) ? readFileSync(target, "utf8") : null;
    if (current === row.content) continue;
    if (!existsSync(dirname(target))) {
      mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
      own(dirname(dirname(target)));
      own(dirname(target));
    }
    if (current !== null) {
      const aside = `${target}.before-restore-${stamp}`;
      renameSync(target, aside);
      keptAside.push({ path: row.path, as: relative(layout.root, aside) });
    }
    writeFileDurable(target, row.content, { mode: 0o600 });
    own(target);
    written.push(row.path);
  }
  staged.run(`DROP TABLE ${CARRIED_TABLE}`);
  return { written, keptAside };
}
