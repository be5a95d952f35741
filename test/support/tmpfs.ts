/**
 * A small tmpfs to stage a full disk on (root only, to mount it), and a filler that fills it.
 * The state-dir and spool tests (local and on the cluster) each had their own copy of these.
 */
import { closeSync, mkdirSync, openSync, writeSync } from "node:fs";

/** Mounts a tmpfs of `size` (e.g. "4m") at `dir` (created); returns its (lazy) unmount. */
export function mountTmpfs(dir: string, size: string, mode: 0o700 | 0o755): () => void {
  const octal = mode.toString(8);
  mkdirSync(dir, { mode });
  const mounted = Bun.spawnSync([
    "mount",
    "-t",
    "tmpfs",
    "-o",
    `size=${size},mode=0${octal}`,
    "o4s-tmpfs-test",
    dir,
  ]);
  if (mounted.exitCode !== 0) throw new Error(`mount: ${mounted.stderr.toString()}`);
  return () => {
    Bun.spawnSync(["umount", "-l", dir]);
  };
}

/** Writes zeros into `path` until its filesystem is full. */
export function fillFilesystem(path: string): void {
  const fd = openSync(path, "w", 0o600);
  const chunk = new Uint8Array(64 * 1024);
  try {
    for (;;) writeSync(fd, chunk);
  } catch {
    // ENOSPC: full.
  } finally {
    closeSync(fd);
  }
}
