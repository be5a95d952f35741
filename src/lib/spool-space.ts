/**
 * How much room the spool has: jobs write their workspaces and logs there, and a full one
 * made the next job fail as NONZERO_EXIT with an empty log while diagnostics said healthy
 * (issue 18). Two uses: the daemon refuses new work below a low-water mark, and the local
 * supervisor names a job that failed on a full spool SPOOL_FULL rather than blaming its code.
 * Neutral (like durable-fs.ts): the daemon and a backend both read it.
 */
import { statfsSync } from "node:fs";

export interface SpaceFigures {
  /** What an unprivileged writer may still use (statfs's f_bavail): jobs never run as root. */
  readonly freeBytes: number;
  readonly totalBytes: number;
}

export type StatFs = (path: string) => {
  readonly bavail: number;
  readonly bsize: number;
  readonly blocks: number;
};

export function readSpace(path: string, statfs: StatFs = statfsSync): SpaceFigures {
  const s = statfs(path);
  return { freeBytes: s.bavail * s.bsize, totalBytes: s.blocks * s.bsize };
}

/**
 * Below this the filesystem is full for a job: a write of a few blocks fails with ENOSPC.
 * One mebibyte, not zero, because the last blocks go to metadata and to a write in flight.
 */
export const FULL_BELOW_BYTES = 1024 * 1024;

const GIB = 1024 * 1024 * 1024;

/**
 * The low-water mark when the admin sets none: 5 % of the filesystem, at most 1 GiB. A small
 * spool is not declared low when half empty, and a petabyte one keeps a useful margin.
 */
export function defaultLowWaterBytes(totalBytes: number): number {
  return Math.min(GIB, Math.floor(totalBytes * 0.05));
}

/** `1.5 GiB`, `512 MiB`, `12 KiB`: for messages an admin reads. */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const shown = unit === 0 || value >= 100 ? Math.round(value).toString() : value.toFixed(1);
  return `${shown} ${units[unit]}`;
}

/**
 * The spool's fullness as the backends' end-naming decorator reads it
 * (orchestration/spool-full-endings.ts): null when it cannot be read, which names nothing.
 */
export function spoolFullness(spoolDir: string, statfs: StatFs = statfsSync) {
  return {
    fullBelowBytes: FULL_BELOW_BYTES,
    read(): SpaceFigures | null {
      try {
        return readSpace(spoolDir, statfs);
      } catch {
        return null;
      }
    },
    format: formatBytes,
  };
}
