/**
 * A local job array's durable element records: one append-only `elements.jsonl` in the job
 * directory, written by the array's one supervisor (a line when an element starts, a line
 * when it ends, each flushed before the next step) and folded by readers into each element's
 * start and end. Appending keeps a 1,000-element array at two small writes per element where
 * rewriting one state file would write the whole array each time.
 *
 * Also each element's own names: its logs beside the allocation's (`stdout.log.K`, the name
 * `logs --index K` reads on every backend) and its cgroup beside the array's (`TOKEN.K`).
 */
import { closeSync, constants, fsyncSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { readTextCapped } from "../../lib/bounded-read.ts";
import {
  type ExitRecord,
  exitRecordSchema,
  JOB_FILES,
  type JobLimits,
  type JobRecord,
  type JobStart,
  jobStartSchema,
} from "./records.ts";

/** Each element's start and end; an element with neither has not started. */
export interface ElementRecord {
  readonly start: JobStart | null;
  readonly exit: ExitRecord | null;
}

const lineSchema = v.union([
  v.strictObject({ index: v.pipe(v.number(), v.integer(), v.minValue(0)), start: jobStartSchema }),
  v.strictObject({ index: v.pipe(v.number(), v.integer(), v.minValue(0)), exit: exitRecordSchema }),
]);

/**
 * Generous for two lines per element (an exit message is a sentence); a larger file is not
 * one a supervisor wrote, and reading it whole every tick would stall the reconciler.
 */
const ELEMENTS_MAX_BYTES_PER_ELEMENT = 16 * 1024;

/** Appends one line and flushes it: an element's start or end is on disk before it is acted on. */
function appendLine(dir: string, line: v.InferOutput<typeof lineSchema>): void {
  const fd = openSync(
    join(dir, JOB_FILES.elements),
    constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW,
    0o600,
  );
  try {
    const bytes = Buffer.from(`${JSON.stringify(line)}\n`, "utf8");
    let offset = 0;
    while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export function recordElementStart(dir: string, index: number, start: JobStart): void {
  appendLine(dir, { index, start });
}

export function recordElementExit(dir: string, index: number, exit: ExitRecord): void {
  appendLine(dir, { index, exit });
}

/**
 * Every element the log names, by index. A last line cut short (the supervisor died
 * mid-write) is ignored: that element's step is simply not recorded. Anything else that does
 * not parse throws, like any corrupt record: the caller reports Indeterminate, never a phase.
 */
export function readElements(dir: string, size: number): Map<number, ElementRecord> {
  const path = join(dir, JOB_FILES.elements);
  const read = readTextCapped(path, size * ELEMENTS_MAX_BYTES_PER_ELEMENT);
  const elements = new Map<number, ElementRecord>();
  switch (read.kind) {
    case "Missing":
      return elements;
    case "TooLarge":
      throw new Error(`${path} is ${read.sizeBytes} bytes: not a record this backend wrote`);
    case "NotAFile":
      throw new Error(`${path} is not a regular file: not a record this backend wrote`);
    case "Read":
      break;
    default: {
      const never: never = read;
      throw new Error(`unhandled read ${JSON.stringify(never)}`);
    }
  }
  // Whole lines only: after the last newline is "" or a line cut short.
  const complete = read.text.split("\n").slice(0, -1);
  for (const text of complete) {
    const line = v.parse(lineSchema, JSON.parse(text));
    if (line.index >= size) throw new Error(`${path} names element ${line.index} of ${size}`);
    const known = elements.get(line.index) ?? { start: null, exit: null };
    elements.set(
      line.index,
      "start" in line ? { ...known, start: line.start } : { ...known, exit: line.exit },
    );
  }
  return elements;
}

/** Element `index`'s log: the allocation's, suffixed with its index, as on a cluster. */
export function elementLogPath(allocationLog: string, index: number): string {
  return `${allocationLog}.${index}`;
}

/** Element `index`'s cgroup: the array's name (its token) suffixed with the index. */
export function elementLimits(limits: JobLimits | undefined, index: number): JobLimits | undefined {
  if (limits === undefined || limits.cgroup === null) return limits;
  return {
    ...limits,
    cgroup: { ...limits.cgroup, dirs: limits.cgroup.dirs.map((d) => `${d}.${index}`) },
  };
}

/** The token a job cgroup's name belongs to: an element's `TOKEN.K` is its array's. */
export function cgroupOwnerToken(name: string): string {
  const match = /^(.+)\.\d+$/.exec(name);
  return match?.[1] ?? name;
}

/** The array's size, or null for a single job. */
export function arraySizeOf(record: JobRecord): number | null {
  return record.array?.size ?? null;
}
