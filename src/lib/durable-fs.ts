/**
 * The few file operations that durable state rests on: the local backend's job records, the
 * daemon's signing key and admin token, the workers' credential files. One copy, because
 * each guards a failure mode that is easy to reintroduce when written again:
 *
 * - The data is written to a temporary sibling, fsynced, and only then given its name, so a
 *   reader never sees a torn or short file (a truncated key, half a JSON record).
 * - The mode is set with fchmod after open: the umask may have narrowed it, and readers that
 *   check for exactly 0600 would then refuse a file this process wrote.
 * - "Written durably" means the data and the directory entry naming it both reached the
 *   disk: without the directory fsync a power cut can leave a file whose contents were
 *   flushed under a name that was not, and a record that "existed before the process
 *   started" would not exist after the reboot.
 *
 * This module is neutral on purpose: backends and core code both use it, and core code may
 * not import a backend package.
 */

import { randomBytes as cryptoRandomBytes } from "node:crypto";
import {
  closeSync,
  fchmodSync,
  fsyncSync,
  linkSync,
  lstatSync,
  openSync,
  renameSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";

/** A random-bytes source; injected where a caller wants its randomness deterministic. */
export type RandomBytes = (n: number) => Uint8Array;

export interface DurableWriteOptions {
  /** Exact permission bits of the new file (fchmod'ed, so the umask cannot narrow them). */
  readonly mode?: number;
  /** Names the temporary sibling; defaults to node:crypto. */
  readonly random?: RandomBytes;
}

export function fsyncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes a new file exclusively (`wx`), sets its exact mode, and flushes it. */
function writeNewFileSynced(path: string, data: string | Uint8Array, mode: number): void {
  const fd = openSync(path, "wx", mode);
  try {
    fchmodSync(fd, mode);
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    let offset = 0;
    while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Hidden (leading dot) so that directory listings which skip dot-files never see it. */
function tempSibling(path: string, random: RandomBytes): string {
  return join(dirname(path), `.tmp-${basename(path)}-${Buffer.from(random(8)).toString("hex")}`);
}

/**
 * Replaces `path` atomically: readers see the old content or the complete new content,
 * never a torn write. The new name is NOT yet durable: callers that write several files into
 * one directory fsync it once afterwards; everyone else wants `writeFileDurable`.
 */
export function replaceFileSynced(
  path: string,
  data: string | Uint8Array,
  options: DurableWriteOptions = {},
): void {
  const tmp = tempSibling(path, options.random ?? cryptoRandomBytes);
  try {
    writeNewFileSynced(tmp, data, options.mode ?? 0o600);
    renameSync(tmp, path);
  } catch (error) {
    unlinkQuietly(tmp);
    throw error;
  }
}

/** `replaceFileSynced`, and the new name is on disk when this returns. */
export function writeFileDurable(
  path: string,
  data: string | Uint8Array,
  options: DurableWriteOptions = {},
): void {
  replaceFileSynced(path, data, options);
  fsyncDir(dirname(path));
}

/**
 * Publishes `path` only if nobody has: link(2) fails with EEXIST instead of replacing, so of
 * several racing writers exactly one wins, and the winner's file is complete before it has a
 * name (a rename would let the last writer silently replace a file the first one's readers
 * already trusted). Returns false when someone else's file is already there.
 */
export function publishExclusive(
  path: string,
  data: string | Uint8Array,
  options: DurableWriteOptions = {},
): boolean {
  const tmp = tempSibling(path, options.random ?? cryptoRandomBytes);
  try {
    writeNewFileSynced(tmp, data, options.mode ?? 0o600);
    try {
      linkSync(tmp, path);
    } catch (error) {
      if (errorCode(error) === "EEXIST") return false;
      throw error;
    }
  } finally {
    unlinkQuietly(tmp);
  }
  fsyncDir(dirname(path));
  return true;
}

export type PrivateFileCheck =
  | { readonly kind: "Missing" }
  /** A directory, a device, or a symlink (never followed: it could point anywhere). */
  | { readonly kind: "NotAFile" }
  /** Permission bits other than exactly 0600. */
  | { readonly kind: "WrongMode"; readonly mode: number }
  | { readonly kind: "Private" };

/**
 * Vets a secret file (a key, a token) before it is read: a regular file of mode exactly 0600.
 * A wider mode means others could have read it already, so the callers refuse it rather than
 * quietly narrowing it. Any error but ENOENT is thrown.
 */
export function checkPrivateFile(path: string): PrivateFileCheck {
  let stat: ReturnType<typeof lstatSync>;
  try {
    stat = lstatSync(path);
  } catch (error) {
    if (errorCode(error) === "ENOENT") return { kind: "Missing" };
    throw error;
  }
  if (!stat.isFile()) return { kind: "NotAFile" };
  const mode = stat.mode & 0o777;
  if (mode !== 0o600) return { kind: "WrongMode", mode };
  return { kind: "Private" };
}

/** The `code` of a Node system error (`ENOENT`, `EEXIST`, ...), if it has one. */
export function errorCode(error: unknown): string | undefined {
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = (error as { readonly code: unknown }).code;
    return typeof code === "string" ? code : undefined;
  }
  return undefined;
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone (linked-then-unlinked, renamed, or never created): nothing to clean.
  }
}
