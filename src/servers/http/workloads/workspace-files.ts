/**
 * Files in a workload's workspace, reached from the spool one component at a time with no
 * link followed (beneath-fs.ts): whatever a job planted in its workspace (a link to /etc, a
 * directory swapped for a link mid-upload) cannot make the daemon, often root, read or
 * write outside it. An upload is written to a temporary file in the spool's staging
 * directory (`UPLOAD_STAGING`, the daemon's own, 0700) and renamed over the target in its
 * directory (held by fd): rename(2) never follows a link and never writes into an existing
 * inode, so a hard link planted at the name gains nothing, and a failed or too-large upload
 * leaves the old file as it was. The temporary file is never in a workspace: a daemon
 * killed mid-upload left `.openai4s-upload-*` files that listings showed as the user's own
 * (81 MB in one run); in the staging directory no listing sees them, no job can touch them,
 * and the next start empties it (`sweepUploadStaging`).
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  fsyncSync,
  lstatSync,
  openSync,
  readdirSync,
  renameSync,
  rmdirSync,
  type Stats,
  unlinkSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import type { LaunchSubject } from "../../../core/sandbox.ts";
import {
  atFd,
  BeneathError,
  makeDirBeneath,
  type Owner,
  openDirBeneath,
} from "../../../lib/beneath-fs.ts";
import { errorCode } from "../../../lib/durable-fs.ts";
import { ApiError } from "../problem.ts";

/** What the files routes need of the daemon, bound by the composition. */
export interface WorkspaceFilesDeps {
  readonly spool: string;
  readonly workspaceDir: (workloadId: string) => string;
  /**
   * The identity the workload's job runs as, claimed now (a root daemon leases a uid per
   * workspace and gives it the directory); null: the daemon's own uid.
   */
  readonly claimIdentity: (workspaceDir: string, subject: LaunchSubject) => Owner | null;
  /** The largest upload accepted (`serve --max-upload-size`). */
  readonly maxUploadBytes: number;
}

const O_CLOEXEC = 0o2000000;
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | O_CLOEXEC;
const CREATE_FLAGS =
  constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | O_CLOEXEC;
const UPLOAD_DIR_MODE = 0o700;

/** The spool's directory of uploads in flight (beside `workloads/`, on its filesystem). */
export const UPLOAD_STAGING = ".uploads";

/**
 * Empties the staging directory: what a daemon killed mid-upload left there. Called at start
 * under the state dir's lock, when no upload of ours runs. Regular files only; the names
 * removed are returned for the log.
 */
export function sweepUploadStaging(spool: string): readonly string[] {
  let dirFd: number;
  try {
    dirFd = openDirBeneath(spool, join(spool, UPLOAD_STAGING));
  } catch (error) {
    if (errorCode(error) === "ENOENT") return [];
    throw error;
  }
  const removed: string[] = [];
  try {
    for (const name of readdirSync(atFd(dirFd, "."))) {
      if (!lstatSync(atFd(dirFd, name)).isFile()) continue;
      unlinkSync(atFd(dirFd, name));
      removed.push(name);
    }
  } finally {
    closeSync(dirFd);
  }
  return removed;
}

export function pathRefused(detail: string): ApiError {
  return new ApiError({ status: 400, slug: "path-refused", title: "Path refused", detail });
}

export function fileNotFound(detail: string): ApiError {
  return new ApiError({ status: 404, slug: "file-not-found", title: "No such file", detail });
}

export function fileConflict(detail: string): ApiError {
  return new ApiError({ status: 409, slug: "file-conflict", title: "Wrong kind of entry", detail });
}

/** Filesystem refusals a client caused, as problems; anything else is the daemon's. */
export function asFileProblem(error: unknown, shown: string): unknown {
  if (error instanceof BeneathError) return pathRefused(`${shown}: ${error.message}`);
  const code = errorCode(error);
  if (code === "ENOENT") return fileNotFound(`${shown} does not exist in the workspace`);
  if (code === "ENOTDIR" || code === "ELOOP") {
    return pathRefused(`${shown} passes through a file or a symbolic link`);
  }
  if (code === "ENAMETOOLONG") return pathRefused(`${shown} is too long`);
  // open(2) of a unix socket a job planted: not a file to stream, like a FIFO (was a 500).
  if (code === "ENXIO") return fileConflict(`${shown} is not a regular file of the workspace`);
  return error;
}

/** The directory holding `parts` (its last one being the entry), as an owned fd. */
function openParent(
  deps: WorkspaceFilesDeps,
  workloadId: string,
  parts: readonly string[],
  create: { readonly owner: Owner | null } | null,
): number {
  const dir = join(deps.workspaceDir(workloadId), ...parts.slice(0, -1));
  return openDirBeneath(
    deps.spool,
    dir,
    create === null ? null : { mode: UPLOAD_DIR_MODE, owner: create.owner },
  );
}

/**
 * Makes the workspace (an upload before the first attempt) and settles who owns it: the
 * identity its job will run as, so the job can read what was uploaded for it.
 */
export function prepareWorkspace(
  deps: WorkspaceFilesDeps,
  workloadId: string,
  subject: LaunchSubject,
): Owner | null {
  const workspace = deps.workspaceDir(workloadId);
  makeDirBeneath(deps.spool, workspace, { mode: 0o700 });
  const owner = deps.claimIdentity(workspace, subject);
  if (owner !== null) {
    const fd = openDirBeneath(deps.spool, workspace);
    try {
      fchownSync(fd, owner.uid, owner.gid);
    } finally {
      closeSync(fd);
    }
  }
  return owner;
}

function lstatAt(dirFd: number, name: string): Stats | null {
  try {
    return lstatSync(atFd(dirFd, name));
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw error;
  }
}

export interface UploadTarget {
  /** Writes one chunk of the body (bounded by the caller's size cap). */
  write(chunk: Uint8Array): void;
  /** The file in place, durable, with its mode and owner. */
  commit(): { readonly sizeBytes: number };
  /** Nothing left behind (the temporary file removed); the old file untouched. */
  abandon(): void;
}

export function beginUpload(
  deps: WorkspaceFilesDeps,
  workloadId: string,
  subject: LaunchSubject,
  parts: readonly string[],
  mode: number,
  shown: string,
): UploadTarget {
  let dirFd: number;
  let stageFd: number;
  let owner: Owner | null;
  try {
    owner = prepareWorkspace(deps, workloadId, subject);
    dirFd = openParent(deps, workloadId, parts, { owner });
  } catch (error) {
    throw asFileProblem(error, shown);
  }
  try {
    stageFd = openDirBeneath(deps.spool, join(deps.spool, UPLOAD_STAGING), {
      mode: 0o700,
      owner: null,
    });
  } catch (error) {
    closeSync(dirFd);
    throw error;
  }
  const name = parts[parts.length - 1] as string;
  const temp = `upload-${crypto.randomUUID()}`;
  let fd = -1;
  let sizeBytes = 0;
  const cleanup = (removeTemp: boolean) => {
    if (fd >= 0) closeSync(fd);
    fd = -1;
    if (removeTemp) {
      try {
        unlinkSync(atFd(stageFd, temp));
      } catch {
        // Already renamed or never made.
      }
    }
    closeSync(stageFd);
    closeSync(dirFd);
  };
  try {
    const existing = lstatAt(dirFd, name);
    if (existing?.isSymbolicLink()) {
      throw pathRefused(`${shown} is a symbolic link: refusing to replace it`);
    }
    if (existing !== null && !existing.isFile()) {
      throw fileConflict(`${shown} exists and is not a regular file`);
    }
    fd = openSync(atFd(stageFd, temp), CREATE_FLAGS, 0o600);
    if (owner !== null) fchownSync(fd, owner.uid, owner.gid);
    // Exactly the mode asked (the umask would narrow it), set after the chown, which
    // clears setuid-like bits.
    fchmodSync(fd, mode);
  } catch (error) {
    cleanup(true);
    throw asFileProblem(error, shown);
  }
  return {
    write(chunk) {
      let offset = 0;
      while (offset < chunk.byteLength) {
        offset += writeSync(fd, chunk, offset, chunk.byteLength - offset);
      }
      sizeBytes += chunk.byteLength;
    },
    commit() {
      try {
        fsyncSync(fd);
        renameSync(atFd(stageFd, temp), atFd(dirFd, name));
      } catch (error) {
        cleanup(true);
        throw asFileProblem(error, shown);
      }
      cleanup(false);
      return { sizeBytes };
    },
    abandon() {
      cleanup(true);
    },
  };
}

/** An open regular file of the workspace, for a download; the caller closes `fd`. */
export function openForDownload(
  deps: WorkspaceFilesDeps,
  workloadId: string,
  parts: readonly string[],
  shown: string,
): { readonly fd: number; readonly sizeBytes: number } {
  let dirFd: number;
  try {
    dirFd = openParent(deps, workloadId, parts, null);
  } catch (error) {
    throw asFileProblem(error, shown);
  }
  try {
    const fd = openSync(atFd(dirFd, parts[parts.length - 1] as string), READ_FLAGS);
    const st = fstatSync(fd);
    const workspaceOwner = fstatSync(dirFd).uid;
    // A FIFO or device a job planted is not a file to stream; a second name for a file
    // that is neither the job's nor an upload is a hard link to something else's data.
    if (!st.isFile() || (st.nlink > 1 && st.uid !== workspaceOwner)) {
      closeSync(fd);
      throw fileConflict(`${shown} is not a regular file of the workspace`);
    }
    return { fd, sizeBytes: st.size };
  } catch (error) {
    throw asFileProblem(error, shown);
  } finally {
    closeSync(dirFd);
  }
}

/** Removes a file, a link (itself) or an empty directory. */
export function removeEntry(
  deps: WorkspaceFilesDeps,
  workloadId: string,
  parts: readonly string[],
  shown: string,
): void {
  let dirFd: number;
  try {
    dirFd = openParent(deps, workloadId, parts, null);
  } catch (error) {
    throw asFileProblem(error, shown);
  }
  const at = atFd(dirFd, parts[parts.length - 1] as string);
  try {
    const st = lstatSync(at);
    if (st.isDirectory()) rmdirSync(at);
    else unlinkSync(at);
  } catch (error) {
    const code = errorCode(error);
    if (code === "ENOTEMPTY" || code === "EEXIST") {
      throw fileConflict(`${shown} is a directory that is not empty`);
    }
    throw asFileProblem(error, shown);
  } finally {
    closeSync(dirFd);
  }
}
