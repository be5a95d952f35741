/**
 * Directories and files below a trusted root (the spool), reached one component at a time
 * without following a symbolic link at any of them. Issue 18: a root daemon whose spool was
 * swapped for a link by another user created workload dirs and chowned a workspace where that
 * user pointed; `mkdir -p` and `chown` by path follow every link on the way.
 *
 * Node and Bun have no openat(2). The same effect, with no FFI: each component is opened with
 * O_DIRECTORY|O_NOFOLLOW (a link there fails with ELOOP or ENOTDIR), and the next operation
 * names its target as `/proc/self/fd/N/name`: the kernel resolves that magic link to the very
 * directory the fd holds (a later rename or swap of its path changes nothing), then looks up
 * `name` in it. mkdir(2) never follows a link in its last component; the final chown and
 * chmod go through fchown/fchmod on an fd opened O_NOFOLLOW. The root itself must already be
 * trusted: its ancestors are checked at start (state-ownership.ts), and it is opened
 * O_NOFOLLOW too.
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
} from "node:fs";
import { isAbsolute, relative } from "node:path";
import { errorCode } from "./durable-fs.ts";

/** Linux's value; Bun sets it already, named here because a leaked dir fd is an escape. */
const O_CLOEXEC = 0o2000000;
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | O_CLOEXEC;
/** O_NONBLOCK: opening a FIFO a job planted must not hang the daemon. */
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | O_CLOEXEC;

export interface Owner {
  readonly uid: number;
  readonly gid: number;
}

/** A path below the root that is, or passes through, something other than a real directory. */
export class BeneathError extends Error {
  readonly code = "EBENEATH";
}

/** `path`'s components below `root`; throws for a path outside it (a caller's bug). */
function componentsBelow(root: string, path: string): readonly string[] {
  const rel = relative(root, path);
  if (rel === "") return [];
  const parts = rel.split("/");
  if (isAbsolute(rel) || parts.some((p) => p === ".." || p === "." || p === "")) {
    throw new Error(`${path} is not below ${root}`);
  }
  return parts;
}

/** The name `name` inside the directory that `fd` holds, whatever its path is now. */
export function atFd(fd: number, name: string): string {
  return `/proc/self/fd/${fd}/${name}`;
}

function openDirAt(parentFd: number, name: string, shownPath: string): number {
  try {
    return openSync(atFd(parentFd, name), DIR_FLAGS);
  } catch (error) {
    const code = errorCode(error);
    if (code === "ELOOP" || code === "ENOTDIR") {
      throw new BeneathError(
        `${shownPath} is not a directory (a symbolic link or a file): refusing to follow it`,
      );
    }
    throw error;
  }
}

function openRoot(root: string): number {
  try {
    return openSync(root, DIR_FLAGS);
  } catch (error) {
    const code = errorCode(error);
    if (code === "ELOOP" || code === "ENOTDIR") {
      throw new BeneathError(
        `${root} is not a directory (a symbolic link or a file): refusing to follow it`,
      );
    }
    throw error;
  }
}

/**
 * One walk's open directories, by path below the root: paths that share a prefix (a
 * workload dir, its workspace, its allocation dir) open each shared component once.
 */
interface Walk {
  /** An fd of the directory at `path` (owned by the walk); made when missing and asked. */
  dirAt(path: string, createMode: number | null): number;
  close(): void;
}

function startWalk(root: string, createOwner: Owner | null = null): Walk {
  const opened = new Map<string, number>([["", openRoot(root)]]);
  const step = (parentFd: number, name: string, shown: string, createMode: number | null) => {
    try {
      return openDirAt(parentFd, name, shown);
    } catch (error) {
      if (createMode === null || errorCode(error) !== "ENOENT") throw error;
    }
    try {
      // mkdir never follows a link in its last component: one planted since the open
      // above is EEXIST here, and the open below refuses it.
      mkdirSync(atFd(parentFd, name), { mode: createMode });
    } catch (error) {
      if (errorCode(error) !== "EEXIST") throw error;
    }
    const fd = openDirAt(parentFd, name, shown);
    // Given through the fd just opened O_NOFOLLOW: a directory an upload made for a job's
    // files must be the job's, or the job cannot write beside them.
    if (createOwner !== null) fchownSync(fd, createOwner.uid, createOwner.gid);
    return fd;
  };
  return {
    dirAt(path, createMode) {
      const parts = componentsBelow(root, path);
      let fd = opened.get("") as number;
      for (let i = 0; i < parts.length; i++) {
        const key = parts.slice(0, i + 1).join("/");
        const known = opened.get(key);
        if (known !== undefined) {
          fd = known;
          continue;
        }
        fd = step(fd, parts[i] as string, `${root}/${key}`, createMode);
        opened.set(key, fd);
      }
      return fd;
    },
    close() {
      for (const fd of opened.values()) closeSync(fd);
      opened.clear();
    },
  };
}

/**
 * Walks from `root` to `path` and calls `use` with an fd of the directory at `path`. Missing
 * components are made with `createMode` (null: a missing one is ENOENT, as for any open).
 */
function withDirBeneath<T>(
  root: string,
  path: string,
  createMode: number | null,
  use: (fd: number) => T,
): T {
  const walk = startWalk(root);
  try {
    return use(walk.dirAt(path, createMode));
  } finally {
    walk.close();
  }
}

export interface MakeDirOptions {
  /** Mode of every directory made (minus the umask's bits: never looser than asked). */
  readonly mode: number;
  /** Also set exactly `mode` on each path asked for when it existed or the umask narrowed it. */
  readonly exactMode?: boolean;
}

/**
 * `mkdir -p` of each path below `root` (shared parents opened once), following no link;
 * refuses one on the way (BeneathError).
 */
export function makeDirsBeneath(
  root: string,
  paths: readonly string[],
  options: MakeDirOptions,
): void {
  const walk = startWalk(root);
  try {
    for (const path of paths) {
      const fd = walk.dirAt(path, options.mode);
      if (options.exactMode === true && (fstatSync(fd).mode & 0o7777) !== options.mode) {
        fchmodSync(fd, options.mode);
      }
    }
  } finally {
    walk.close();
  }
}

/** `mkdir -p path` below `root`, following no link; refuses one on the way (BeneathError). */
export function makeDirBeneath(root: string, path: string, options: MakeDirOptions): void {
  makeDirsBeneath(root, [path], options);
}

/** chmod of the directory at `path` below `root`, no link followed on the way or at it. */
export function chmodDirBeneath(root: string, path: string, mode: number): void {
  withDirBeneath(root, path, null, (fd) => fchmodSync(fd, mode));
}

/**
 * chown of the directory at `path` below `root`, and with `regularFiles` of each regular
 * file directly in it. Each file is opened O_NOFOLLOW and judged by fstat on that fd, so a
 * job that swaps a file for a link between the listing and the chown gains nothing: a link
 * fails to open, and anything else that is not a regular file is left alone.
 */
export function chownDirBeneath(
  root: string,
  path: string,
  owner: Owner,
  options: { readonly regularFiles?: boolean } = {},
): void {
  withDirBeneath(root, path, null, (dirFd) => {
    if (options.regularFiles === true) {
      for (const name of readdirSync(atFd(dirFd, "."))) chownRegularFileAt(dirFd, name, owner);
    }
    fchownSync(dirFd, owner.uid, owner.gid);
  });
}

function chownRegularFileAt(dirFd: number, name: string, owner: Owner): void {
  let fd: number;
  try {
    fd = openSync(atFd(dirFd, name), FILE_FLAGS);
  } catch (error) {
    const code = errorCode(error);
    // A link (ELOOP), or a name gone since the listing: not a file of ours to give.
    if (code === "ELOOP" || code === "ENOENT" || code === "ENXIO") return;
    throw error;
  }
  try {
    if (fstatSync(fd).isFile()) fchownSync(fd, owner.uid, owner.gid);
  } finally {
    closeSync(fd);
  }
}

/**
 * Opens (creating when asked) the file at `path` below `root`: its directory is reached with
 * no link followed, and O_NOFOLLOW refuses a link at the file itself. Returns the fd.
 */
export function openFileBeneath(root: string, path: string, flags: number, mode: number): number {
  const slash = path.lastIndexOf("/");
  const dir = path.slice(0, slash);
  const name = path.slice(slash + 1);
  return withDirBeneath(root, dir, null, (dirFd) => {
    try {
      return openSync(atFd(dirFd, name), flags | constants.O_NOFOLLOW | O_CLOEXEC, mode);
    } catch (error) {
      if (errorCode(error) === "ELOOP") {
        throw new BeneathError(`${path} is a symbolic link: refusing to follow it`);
      }
      throw error;
    }
  });
}

/**
 * An fd (the caller closes it) of the directory at `path` below `root`, no link followed on
 * the way or at it. With `create`, missing directories are made with its mode and given to
 * its owner. The fd names the directory itself: a later swap of any path component for a
 * link changes nothing for what is done through `atFd(fd, name)`.
 */
export function openDirBeneath(
  root: string,
  path: string,
  create: { readonly mode: number; readonly owner: Owner | null } | null = null,
): number {
  const walk = startWalk(root, create?.owner ?? null);
  try {
    return openSync(atFd(walk.dirAt(path, create?.mode ?? null), "."), DIR_FLAGS);
  } finally {
    walk.close();
  }
}
