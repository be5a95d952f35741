/**
 * sacct's usage rows (a part of parse.ts, whose rules hold here): what ended jobs asked for
 * and used, read leniently except for the job id.
 */
import { excerpt, isJobId, lines, malformed, type Parsed, splitRow } from "./parse.ts";

// ---------------------------------------------------------------------------------------
// sacct usage (steps included): why a job ended, in numbers a person can act on
// ---------------------------------------------------------------------------------------

/** Per job: what it asked for and what it used. Every field is informational (null = unknown). */
export interface JobUsage {
  readonly jobId: string;
  readonly requestedMemoryBytes: number | null;
  /** The largest resident set of any of its steps. */
  readonly maxRssBytes: number | null;
  readonly elapsedSeconds: number | null;
  readonly timeLimitSeconds: number | null;
}

/** `--format` for the usage query (job and step rows, `--parsable2`). */
export const USAGE_FIELDS = ["JobID", "ReqMem", "MaxRSS", "ElapsedRaw", "TimelimitRaw"] as const;

const SIZE_UNITS: Readonly<Record<string, number>> = {
  "": 1,
  K: 1024,
  M: 1024 ** 2,
  G: 1024 ** 3,
  T: 1024 ** 4,
};

/**
 * sacct sizes: "317464K", "50M", "2G"; older versions append n (per node) or c (per CPU) to
 * ReqMem. Anything else (including the "16?" measured while a job was being written) is null.
 */
export function parseSize(raw: string): number | null {
  const match = /^([0-9]+(?:\.[0-9]+)?)([KMGT]?)[nc]?$/.exec(raw.trim());
  if (!match) return null;
  const unit = SIZE_UNITS[match[2] ?? ""];
  return unit === undefined ? null : Math.round(Number(match[1]) * unit);
}

function parseWholeNumber(raw: string): number | null {
  const t = raw.trim();
  return /^[0-9]{1,12}$/.test(t) ? Number(t) : null;
}

/**
 * Rows are "123" (the job) and "123.batch", "123.0" (its steps). A job id that does not
 * parse makes the answer malformed, as everywhere; the numbers are read leniently.
 */
export function parseUsage(stdout: string): Parsed<readonly JobUsage[]> {
  const byJob = new Map<string, JobUsage>();
  for (const line of lines(stdout)) {
    const row = splitRow("sacct", line, USAGE_FIELDS.length);
    if (row.kind === "Malformed") return row;
    const [rawId, reqMem, maxRss, elapsed, limit] = row.value.map((p) => p.trim());
    const match = /^([0-9]+)(?:\.[A-Za-z0-9_+]+)?$/.exec(rawId ?? "");
    const jobId = match?.[1];
    if (jobId === undefined || !isJobId(jobId)) {
      return malformed(`sacct job id in ${excerpt(line)}`);
    }
    const previous = byJob.get(jobId) ?? {
      jobId,
      requestedMemoryBytes: null,
      maxRssBytes: null,
      elapsedSeconds: null,
      timeLimitSeconds: null,
    };
    const rss = parseSize(maxRss ?? "");
    const isJobRow = rawId === jobId;
    const minutes = parseWholeNumber(limit ?? "");
    byJob.set(jobId, {
      jobId,
      requestedMemoryBytes: isJobRow
        ? (parseSize(reqMem ?? "") ?? previous.requestedMemoryBytes)
        : previous.requestedMemoryBytes,
      maxRssBytes: rss === null ? previous.maxRssBytes : Math.max(rss, previous.maxRssBytes ?? 0),
      elapsedSeconds: isJobRow ? parseWholeNumber(elapsed ?? "") : previous.elapsedSeconds,
      timeLimitSeconds: isJobRow
        ? minutes === null
          ? null
          : minutes * 60
        : previous.timeLimitSeconds,
    });
  }
  return { kind: "Parsed", value: [...byJob.values()] };
}
