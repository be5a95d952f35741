/**
 * The spool's free space against its low-water mark, read when asked (statfs is one system
 * call): below it `/v1/diagnostics` says the spool is unhealthy and new submissions get 503
 * SPOOL_FULL, until space returns. Issue 18: a full spool made the next job fail as
 * NONZERO_EXIT with an empty log while diagnostics said healthy.
 */

import { UsageError } from "../../lib/command/command.ts";
import {
  defaultLowWaterBytes,
  formatBytes,
  readSpace,
  type StatFs,
} from "../../lib/spool-space.ts";
import type { SpoolSpace, SpoolSpaceReport } from "../../servers/http/deps.ts";

export interface SpoolWatchOptions {
  readonly path: string;
  /** What the messages call it: "spool" (default) or "state dir". */
  readonly what?: string;
  /** The mark when none is given; default: 5 % of the filesystem, at most 1 GiB. */
  readonly defaultLowWater?: (totalBytes: number) => number;
  /** `--spool-low-water`; null: 5 % of the filesystem, at most 1 GiB. 0 refuses nothing. */
  readonly lowWaterBytes: number | null;
  readonly statfs?: StatFs;
}

export function watchSpool(options: SpoolWatchOptions): SpoolSpace {
  const { path } = options;
  const what = options.what ?? "spool";
  const defaultLowWater = options.defaultLowWater ?? defaultLowWaterBytes;
  return {
    report(): SpoolSpaceReport {
      let space: ReturnType<typeof readSpace>;
      try {
        space = readSpace(path, options.statfs);
      } catch (error) {
        // Fail closed: nothing can be placed on a spool whose room cannot even be read.
        return {
          path,
          freeBytes: null,
          totalBytes: null,
          lowWaterBytes: options.lowWaterBytes,
          low: true,
          message: `cannot read the free space of the ${what} ${path} (${String(error)}): new work is refused until it can be read`,
        };
      }
      const lowWaterBytes = options.lowWaterBytes ?? defaultLowWater(space.totalBytes);
      const low = space.freeBytes < lowWaterBytes;
      return {
        path,
        freeBytes: space.freeBytes,
        totalBytes: space.totalBytes,
        lowWaterBytes,
        low,
        message: low
          ? `the ${what} ${path} has ${formatBytes(space.freeBytes)} free of ${formatBytes(space.totalBytes)}, below its low-water mark of ${formatBytes(lowWaterBytes)}: new work is refused until space returns`
          : null,
      };
    },
  };
}

const UNITS: Readonly<Record<string, number>> = {
  "": 1,
  B: 1,
  K: 1024,
  M: 1024 ** 2,
  G: 1024 ** 3,
  T: 1024 ** 4,
};

/** `--spool-low-water`: bytes, or K/M/G/T (powers of 1024, `KiB`/`KB`/`K` alike); 0 is off. */
export function parseLowWater(raw: string, flag = "spool-low-water"): number {
  const match = /^([0-9]+)\s*([KMGT]?)(?:i?B)?$/i.exec(raw.trim());
  const unit = UNITS[(match?.[2] ?? "").toUpperCase()];
  const bytes = match === null || unit === undefined ? Number.NaN : Number(match[1]) * unit;
  if (!Number.isSafeInteger(bytes)) {
    throw new UsageError(
      `serve: --${flag} must be a size such as 2G, 500M or 0 (off), got ${JSON.stringify(raw)}`,
    );
  }
  return bytes;
}

/**
 * The state dir's mark when none is given: 5 % of its filesystem, at most 256 MiB. The store
 * and the local jobs' records need little room, but a write that finds none fails (a full
 * state dir lost acknowledged jobs, issue 33), so new work stops well before.
 */
export function defaultStateLowWaterBytes(totalBytes: number): number {
  return Math.min(256 * 1024 * 1024, Math.floor(totalBytes * 0.05));
}

/** The state dir's room against `--state-low-water` (null: the default above). */
export function watchStateDir(path: string, lowWaterBytes: number | null): SpoolSpace {
  return watchSpool({
    path,
    what: "state dir",
    lowWaterBytes,
    defaultLowWater: defaultStateLowWaterBytes,
  });
}
