/**
 * The Jupyter contents API's filesystem work inside one session's workspace, by the files
 * API's rules (workloads/workspace-files.ts): every directory is reached from the spool one
 * component at a time with no link followed, a file is opened O_NOFOLLOW and must be a
 * regular file of the workspace, and writes go to a temporary name renamed over the target.
 * A link or FIFO the session's code planted is never followed, read or listed: the daemon
 * (often root) must not read /etc/shadow because a notebook made `data -> /etc`.
 */
import {
  closeSync,
  fstatSync,
  lstatSync,
  readdirSync,
  readSync,
  renameSync,
  type Stats,
} from "node:fs";
import { join } from "node:path";
import type { LaunchSubject } from "../../../core/sandbox.ts";
import { atFd, openDirBeneath } from "../../../lib/beneath-fs.ts";
import { errorCode } from "../../../lib/durable-fs.ts";
import { ApiError } from "../problem.ts";
import {
  asFileProblem,
  beginUpload,
  fileConflict,
  openForDownload,
  prepareWorkspace,
  removeEntry,
  type WorkspaceFilesDeps,
} from "../workloads/workspace-files.ts";

const NEW_DIR_MODE = 0o755;
const NEW_FILE_MODE = 0o644;

/** One session's workspace, as the contents routes address it. */
export interface Workspace {
  readonly files: WorkspaceFilesDeps;
  readonly workloadId: string;
  readonly subject: LaunchSubject;
}

export interface Entry {
  readonly name: string;
  readonly kind: "file" | "directory";
  readonly sizeBytes: number;
  readonly createdMs: number;
  readonly modifiedMs: number;
  readonly mode: number;
}

function entryOf(name: string, st: Stats): Entry | null {
  // Links, FIFOs, sockets and devices are not contents: listing a link would invite a
  // client to open it, and what it names is outside the rules.
  if (!st.isFile() && !st.isDirectory()) return null;
  return {
    name,
    kind: st.isDirectory() ? "directory" : "file",
    sizeBytes: st.size,
    createdMs: Math.min(st.ctimeMs, st.mtimeMs),
    modifiedMs: st.mtimeMs,
    mode: st.mode & 0o7777,
  };
}

function dirOf(ws: Workspace, parts: readonly string[]): string {
  return join(ws.files.workspaceDir(ws.workloadId), ...parts);
}

/** Runs `use` on the directory at `parts` (an fd, no link followed); problems as ApiErrors. */
function withDir<T>(
  ws: Workspace,
  parts: readonly string[],
  shown: string,
  use: (fd: number) => T,
): T {
  let fd: number;
  try {
    fd = openDirBeneath(ws.files.spool, dirOf(ws, parts));
  } catch (error) {
    throw asFileProblem(error, shown);
  }
  try {
    return use(fd);
  } catch (error) {
    throw asFileProblem(error, shown);
  } finally {
    closeSync(fd);
  }
}

/** The workspace itself, which exists only once the first attempt (or upload) made it. */
export function workspaceEntry(ws: Workspace, nowMs: number): Entry {
  try {
    return withDir(ws, [], ws.workloadId, (fd) => entryOf(ws.workloadId, fstatSync(fd)) as Entry);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      return {
        name: ws.workloadId,
        kind: "directory",
        sizeBytes: 0,
        createdMs: nowMs,
        modifiedMs: nowMs,
        mode: 0o700,
      };
    }
    throw error;
  }
}

/** The entry at `parts` (not the workspace itself); null: absent, a link, or not a file. */
export function statEntry(ws: Workspace, parts: readonly string[], shown: string): Entry | null {
  return withDir(ws, parts.slice(0, -1), shown, (fd) => {
    const name = parts[parts.length - 1] as string;
    try {
      return entryOf(name, lstatSync(atFd(fd, name)));
    } catch (error) {
      if (errorCode(error) === "ENOENT") return null;
      throw error;
    }
  });
}

/** A directory's entries, hidden ones (`.name`) aside as Jupyter Server does, sorted. */
export function listDir(ws: Workspace, parts: readonly string[], shown: string): Entry[] {
  return withDir(ws, parts, shown, (fd) => {
    const out: Entry[] = [];
    for (const name of readdirSync(atFd(fd, ".")).sort()) {
      if (name.startsWith(".")) continue;
      try {
        const entry = entryOf(name, lstatSync(atFd(fd, name)));
        if (entry !== null) out.push(entry);
      } catch {
        // Gone since the listing.
      }
    }
    return out;
  });
}

function tooLargeToRead(shown: string, sizeBytes: number, maxBytes: number): ApiError {
  return new ApiError({
    status: 413,
    slug: "payload-too-large",
    title: "File too large for the contents API",
    detail: `${shown} is ${sizeBytes} bytes; the contents API reads at most ${maxBytes} (serve --max-upload-size): download it with GET /v1/workloads/{id}/files/{path} or openai4s cp`,
  });
}

/** A regular file's bytes, whole (bounded by the upload cap). */
export function readWhole(ws: Workspace, parts: readonly string[], shown: string): Buffer {
  const { fd, sizeBytes } = openForDownload(ws.files, ws.workloadId, parts, shown);
  try {
    if (sizeBytes > ws.files.maxUploadBytes) {
      throw tooLargeToRead(shown, sizeBytes, ws.files.maxUploadBytes);
    }
    const buffer = Buffer.alloc(sizeBytes);
    let offset = 0;
    while (offset < sizeBytes) {
      const n = readSync(fd, buffer, offset, sizeBytes - offset, offset);
      if (n === 0) break;
      offset += n;
    }
    return buffer.subarray(0, offset);
  } finally {
    closeSync(fd);
  }
}

/** Writes `bytes` as the file at `parts` (replacing one, keeping its mode); true if new. */
export function writeWhole(
  ws: Workspace,
  parts: readonly string[],
  bytes: Uint8Array,
  shown: string,
): boolean {
  const existing = statIfDirExists(ws, parts, shown);
  if (existing?.kind === "directory") throw fileConflict(`${shown} is a directory`);
  const mode = existing?.mode ?? NEW_FILE_MODE;
  const target = beginUpload(ws.files, ws.workloadId, ws.subject, parts, mode, shown);
  try {
    target.write(bytes);
  } catch (error) {
    target.abandon();
    throw asFileProblem(error, shown);
  }
  target.commit();
  return existing === null;
}

/** The entry, or null when it or its directory does not exist yet (an upload makes them). */
export function statIfDirExists(
  ws: Workspace,
  parts: readonly string[],
  shown: string,
): Entry | null {
  try {
    return statEntry(ws, parts, shown);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

/** `mkdir` at `parts`, given to the identity the session runs as; true if it was made. */
export function makeDir(ws: Workspace, parts: readonly string[], shown: string): boolean {
  const existing = statIfDirExists(ws, parts, shown);
  if (existing?.kind === "directory") return false;
  if (existing !== null) throw fileConflict(`${shown} exists and is not a directory`);
  try {
    const owner = prepareWorkspace(ws.files, ws.workloadId, ws.subject);
    closeSync(openDirBeneath(ws.files.spool, dirOf(ws, parts), { mode: NEW_DIR_MODE, owner }));
  } catch (error) {
    throw asFileProblem(error, shown);
  }
  return true;
}

/** rename(2) within the workspace; the target must not exist (Jupyter answers 409). */
export function renameEntry(
  ws: Workspace,
  from: readonly string[],
  to: readonly string[],
  shown: { readonly from: string; readonly to: string },
): void {
  if (statEntry(ws, from, shown.from) === null) {
    throw asFileProblem(Object.assign(new Error("ENOENT"), { code: "ENOENT" }), shown.from);
  }
  if (statIfDirExists(ws, to, shown.to) !== null) {
    throw new ApiError({
      status: 409,
      slug: "file-conflict",
      title: "Already exists",
      detail: `${shown.to} already exists`,
    });
  }
  withDir(ws, from.slice(0, -1), shown.from, (fromFd) =>
    withDir(ws, to.slice(0, -1), shown.to, (toFd) =>
      renameSync(
        atFd(fromFd, from[from.length - 1] as string),
        atFd(toFd, to[to.length - 1] as string),
      ),
    ),
  );
}

export function deleteEntry(ws: Workspace, parts: readonly string[], shown: string): void {
  removeEntry(ws.files, ws.workloadId, parts, shown);
}
