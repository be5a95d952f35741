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
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { errorCode } from "../../lib/durable-fs.ts";
import { type PreallocateResult, preallocate } from "../../lib/preallocate.ts";
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

/**
 * Appends one line and flushes it: an element's start or end is on disk before it is acted on.
 * A write that fails part-way (a full disk) is cut back off before the error goes up: the
 * retry's line would otherwise follow half a line, and the unparsable pair would make every
 * later read of the array Indeterminate. Only the array's one supervisor appends.
 */
function appendLine(dir: string, line: v.InferOutput<typeof lineSchema>): void {
  const fd = openSync(
    join(dir, JOB_FILES.elements),
    constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW,
    0o600,
  );
  try {
    const before = fstatSync(fd).size;
    try {
      const bytes = Buffer.from(`${JSON.stringify(line)}\n`, "utf8");
      let offset = 0;
      while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
      fsyncSync(fd);
    } catch (error) {
      ftruncateSync(fd, before);
      throw error;
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * Room an element's two lines take at most, in practice (a start line is ~150 bytes, an end
 * line with its message a few hundred).
 */
const ELEMENT_ROOM_BYTES = 1024;

/**
 * Takes the disk room every element's lines will need, up front, inside elements.jsonl (its
 * size unchanged): on a full state dir the lines still land (issue 33). The single job's
 * 64 KiB end-reserve, given back when a write fails, was taken by the daemon's database
 * before an array's later elements could use it.
 */
export function reserveElementRoom(dir: string, size: number): PreallocateResult {
  const fd = openSync(
    join(dir, JOB_FILES.elements),
    constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW,
    0o600,
  );
  try {
    return preallocate(fd, fstatSync(fd).size, size * ELEMENT_ROOM_BYTES);
  } finally {
    closeSync(fd);
  }
}

/** How an element's line is written: at once (tests), or kept until it lands (the supervisor). */
export type LineWriter = (dir: string, write: () => void) => void;
const AT_ONCE: LineWriter = (_dir, write) => write();

export function recordElementStart(
  dir: string,
  index: number,
  start: JobStart,
  writer: LineWriter = AT_ONCE,
): void {
  writer(dir, () => appendLine(dir, { index, start }));
}

export function recordElementExit(
  dir: string,
  index: number,
  exit: ExitRecord,
  writer: LineWriter = AT_ONCE,
): void {
  writer(dir, () => appendLine(dir, { index, exit }));
}

/**
 * What a reader already folded of one array's elements.jsonl: the file (its inode), how far,
 * and the elements so far. The file only grows, so the next read starts where this one
 * stopped: an observation of a 1,000-element array reads what was appended since the last
 * tick, not the whole file (and never allocates the cap, as a capped whole-file read does).
 */
export interface ElementsSeen {
  readonly ino: number;
  readonly offset: number;
  readonly elements: ReadonlyMap<number, ElementRecord>;
}
/** By job directory: the backend's own (local-context.ts), an array forgotten with its record. */
export type ElementsCache = Map<string, ElementsSeen>;

const NEWLINE = 0x0a;

/**
 * Every element the log names, by index. A last line cut short (the supervisor died
 * mid-write) is left unread: that element's step is simply not recorded. Anything else that
 * does not parse throws, like any corrupt record: the caller reports Indeterminate, never a
 * phase. Not a regular file, or over the cap, throws too.
 */
export function readElements(
  dir: string,
  size: number,
  cache?: ElementsCache,
): ReadonlyMap<number, ElementRecord> {
  const path = join(dir, JOB_FILES.elements);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if (errorCode(error) !== "ENOENT") throw error;
    return new Map();
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile())
      throw new Error(`${path} is not a regular file: not a record this backend wrote`);
    if (stat.size > size * ELEMENTS_MAX_BYTES_PER_ELEMENT) {
      throw new Error(`${path} is ${stat.size} bytes: not a record this backend wrote`);
    }
    const cached = cache?.get(dir);
    const from: ElementsSeen =
      cached !== undefined && cached.ino === stat.ino && cached.offset <= stat.size
        ? cached
        : { ino: stat.ino, offset: 0, elements: new Map() };
    const chunk = readFrom(fd, from.offset, stat.size - from.offset);
    // Whole lines only: after the last newline is nothing, or a line cut short.
    const end = chunk.lastIndexOf(NEWLINE);
    if (end < 0) return from.elements;
    const elements = new Map(from.elements);
    for (const text of chunk.subarray(0, end).toString("utf8").split("\n")) {
      const line = v.parse(lineSchema, JSON.parse(text));
      if (line.index >= size) throw new Error(`${path} names element ${line.index} of ${size}`);
      const known = elements.get(line.index) ?? { start: null, exit: null };
      elements.set(
        line.index,
        "start" in line ? { ...known, start: line.start } : { ...known, exit: line.exit },
      );
    }
    cache?.set(dir, { ino: stat.ino, offset: from.offset + end + 1, elements });
    return elements;
  } finally {
    closeSync(fd);
  }
}

/** Up to `length` bytes from `offset` (fewer if the file is shorter by now). */
function readFrom(fd: number, offset: number, length: number): Buffer {
  const buffer = Buffer.alloc(Math.max(0, length));
  let got = 0;
  while (got < buffer.length) {
    const n = readSync(fd, buffer, got, buffer.length - got, offset + got);
    if (n === 0) break;
    got += n;
  }
  return buffer.subarray(0, got);
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
