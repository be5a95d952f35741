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
  /** `--spool-low-water`; null: 5 % of the filesystem, at most 1 GiB. 0 refuses nothing. */
  readonly lowWaterBytes: number | null;
  readonly statfs?: StatFs;
}

export function watchSpool(options: SpoolWatchOptions): SpoolSpace {
  const { path } = options;
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
          message: `cannot read the free space of the spool ${path} (${String(error)}): new work is refused until it can be read`,
        };
      }
      const lowWaterBytes = options.lowWaterBytes ?? defaultLowWaterBytes(space.totalBytes);
      const low = space.freeBytes < lowWaterBytes;
      return {
        path,
        freeBytes: space.freeBytes,
        totalBytes: space.totalBytes,
        lowWaterBytes,
        low,
        message: low
          ? `the spool ${path} has ${formatBytes(space.freeBytes)} free of ${formatBytes(space.totalBytes)}, below its low-water mark of ${formatBytes(lowWaterBytes)}: new work is refused until space returns`
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
export function parseLowWater(raw: string): number {
  const match = /^([0-9]+)\s*([KMGT]?)(?:i?B)?$/i.exec(raw.trim());
  const unit = UNITS[(match?.[2] ?? "").toUpperCase()];
  const bytes = match === null || unit === undefined ? Number.NaN : Number(match[1]) * unit;
  if (!Number.isSafeInteger(bytes)) {
    throw new UsageError(
      `serve: --spool-low-water must be a size such as 2G, 500M or 0 (off), got ${JSON.stringify(raw)}`,
    );
  }
  return bytes;
}
