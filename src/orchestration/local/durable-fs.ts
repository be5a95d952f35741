/**
 * The few file operations the local backend's promises rest on. "Written durably" means the
 * data and the directory entry naming it both reached the disk: without the directory fsync
 * a power cut can leave a file whose contents were flushed under a name that was not, and a
 * record that "existed before the process started" would not exist after the reboot.
 */

import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";

export function fsyncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes a new file exclusively (`wx`), flushes it, and leaves it unnamed elsewhere. */
function writeNewFileSynced(path: string, data: string, mode: number): void {
  const fd = openSync(path, "wx", mode);
  try {
    const bytes = Buffer.from(data, "utf8");
    let offset = 0;
    while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function tempSibling(path: string): string {
  return join(dirname(path), `.tmp-${basename(path)}-${randomBytes(6).toString("hex")}`);
}

/**
 * Replaces `path` atomically: readers see the old content or the complete new content,
 * never a torn write, and the new name is on disk when this returns.
 */
export function writeFileDurable(path: string, data: string, mode = 0o600): void {
  const tmp = tempSibling(path);
  try {
    writeNewFileSynced(tmp, data, mode);
    renameSync(tmp, path);
  } catch (error) {
    unlinkQuietly(tmp);
    throw error;
  }
  fsyncDir(dirname(path));
}

/**
 * Publishes `path` only if nobody has: link(2) fails with EEXIST instead of replacing, so of
 * several racing writers exactly one wins, and the winner's file is complete before it has a
 * name. Returns false when someone else's file is already there.
 */
export function publishExclusive(path: string, data: string, mode = 0o600): boolean {
  const tmp = tempSibling(path);
  try {
    writeNewFileSynced(tmp, data, mode);
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

/** The file's text, or null when it does not exist. Any other error is thrown. */
export function readTextIfExists(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw error;
  }
}

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
    // Already gone (linked-then-unlinked, or never created): nothing to clean.
  }
}
