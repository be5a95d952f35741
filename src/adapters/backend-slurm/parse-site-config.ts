/**
 * What `scontrol show config` prints, for the few settings the daemon follows instead of
 * assuming Slurm's defaults. Lines are `Name = value` (padded); anything else (the heading,
 * blank lines, the cgroup and MPI sections) is skipped. Strict where it matters: a setting
 * that is there but does not read as what it must be makes the answer malformed, never a
 * silent default.
 */
import type { Parsed } from "./parse.ts";

export interface SiteConfig {
  /** MaxArraySize: an array's indices run 0..MaxArraySize-1; null when not printed. */
  readonly maxArraySize: number | null;
}

/** Slurm's own ceiling for MaxArraySize (slurm.conf(5)). */
const MAX_ARRAY_SIZE_CEILING = 4_000_001;

export function parseSiteConfig(stdout: string): Parsed<SiteConfig> {
  let maxArraySize: number | null = null;
  for (const line of stdout.split("\n")) {
    const match = /^MaxArraySize\s*=\s*(.*)$/.exec(line.trim());
    if (match === null) continue;
    const value = (match[1] ?? "").trim();
    const n = /^[0-9]{1,7}$/.test(value) ? Number(value) : Number.NaN;
    // 0 turns arrays off altogether; 1 allows only index 0.
    if (!(n >= 0 && n <= MAX_ARRAY_SIZE_CEILING)) {
      return {
        kind: "Malformed",
        message: `scontrol: MaxArraySize ${JSON.stringify(value.slice(0, 40))} is not a count`,
      };
    }
    maxArraySize = n;
  }
  return { kind: "Parsed", value: { maxArraySize } };
}
