/**
 * `GET .../files?prefix=`: a workspace's entries in a stable order (depth first, names
 * sorted, a directory before what it holds), a bounded page at a time. A page resumes after
 * the cursor's path by comparing paths component by component, so the walk skips whole
 * subtrees before it instead of listing them again; no link is followed (a link is listed as
 * one) and a subtree deeper than MAX_DEPTH is not entered.
 */
import { closeSync, constants, lstatSync, openSync, readdirSync, type Stats } from "node:fs";
import { join } from "node:path";
import { atFd, openDirBeneath } from "../../../lib/beneath-fs.ts";
import type { WorkspaceFilesDeps } from "./workspace-files.ts";

const O_CLOEXEC = 0o2000000;
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | O_CLOEXEC;
const MAX_DEPTH = 64;

export interface FileEntry {
  readonly path: string;
  readonly type: "file" | "directory" | "symlink" | "other";
  readonly sizeBytes: number;
  /** Permission bits in octal, e.g. "0600". */
  readonly mode: string;
  readonly modifiedAt: string;
}

export interface ListRequest {
  /** The directory to list below (components), from the prefix up to its last `/`. */
  readonly dirParts: readonly string[];
  /** What names directly in that directory must start with (the prefix's last part). */
  readonly namePrefix: string;
  /** Resume after this path (components); null: from the start. */
  readonly after: readonly string[] | null;
  readonly limit: number;
}

export interface ListPage {
  readonly items: readonly FileEntry[];
  /** Pass as `cursor` for the next page; null when this was the last. */
  readonly nextCursor: string | null;
}

function entryType(st: Stats): FileEntry["type"] {
  if (st.isFile()) return "file";
  if (st.isDirectory()) return "directory";
  if (st.isSymbolicLink()) return "symlink";
  return "other";
}

/** Negative, zero or positive as `a` comes before, with or after `b` in the walk. */
function compareParts(a: readonly string[], b: readonly string[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i] as string;
    const y = b[i] as string;
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

export function listWorkspace(
  deps: WorkspaceFilesDeps,
  workloadId: string,
  request: ListRequest,
): ListPage {
  const items: FileEntry[] = [];
  let more = false;
  const visit = (dirFd: number, parts: readonly string[], top: boolean): void => {
    const names = readdirSync(atFd(dirFd, "."))
      .filter((name) => !top || name.startsWith(request.namePrefix))
      .sort();
    for (const name of names) {
      if (more) return;
      const path = [...parts, name];
      const order = request.after === null ? 1 : compareParts(path, request.after);
      // Before the cursor: skipped with its subtree, unless it holds the cursor's path.
      if (order < 0 && !isAncestor(path, request.after)) continue;
      let st: Stats;
      try {
        st = lstatSync(atFd(dirFd, name));
      } catch {
        continue; // Gone since the listing.
      }
      if (order > 0) {
        if (items.length === request.limit) {
          more = true;
          return;
        }
        items.push({
          path: path.join("/"),
          type: entryType(st),
          sizeBytes: st.size,
          mode: `0${(st.mode & 0o7777).toString(8).padStart(3, "0")}`,
          modifiedAt: st.mtime.toISOString(),
        });
      }
      if (st.isDirectory() && path.length < MAX_DEPTH) descend(dirFd, name, path);
    }
  };
  const descend = (dirFd: number, name: string, path: readonly string[]) => {
    let fd: number;
    try {
      fd = openSync(atFd(dirFd, name), DIR_FLAGS);
    } catch {
      return; // Swapped for a link or removed since the lstat: nothing to list there.
    }
    try {
      visit(fd, path, false);
    } finally {
      closeSync(fd);
    }
  };
  let rootFd: number;
  try {
    rootFd = openDirBeneath(deps.spool, join(deps.workspaceDir(workloadId), ...request.dirParts));
  } catch {
    // No workspace yet, no such directory, or one that is a link: nothing listed.
    return { items: [], nextCursor: null };
  }
  try {
    visit(rootFd, request.dirParts, true);
  } finally {
    closeSync(rootFd);
  }
  const last = items[items.length - 1];
  return { items, nextCursor: more && last !== undefined ? last.path : null };
}

function isAncestor(path: readonly string[], of: readonly string[] | null): boolean {
  return of !== null && path.length < of.length && path.every((p, i) => p === of[i]);
}
