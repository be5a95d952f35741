/**
 * The records a local job's fate is learnt from (job.json, exit.json, an array's
 * elements.jsonl), kept whatever the
 * state dir's free space: room reserved before the job starts, and writes retried until
 * they land, the supervisor alive meanwhile (issue 33).
 */
import {
  closeSync,
  existsSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { blockFor } from "../../lib/block-sleep.ts";
import { fsyncDir, writeFileDurable } from "../../lib/durable-fs.ts";
import type { Log } from "../../lib/log.ts";

/**
 * Room for the job's records, taken before the job may start: a full state dir made jobs
 * that had run and exited 0 end LOST, their exit records having nowhere to go (issue 33).
 * The reserve is given back to the record that needs it when a write finds no room.
 */
export const END_RESERVE = "end-reserve";
const END_RESERVE_BYTES = 64 * 1024;

export function reserveEndRoom(dir: string): void {
  writeFileDurable(join(dir, END_RESERVE), new Uint8Array(END_RESERVE_BYTES));
}

/** How long a failed record write waits before the next try (tests shorten it). */
export type RetrySleep = (attempt: number) => void;
export const RETRY_SLEEP: RetrySleep = (attempt) => blockFor(Math.min(10_000, 250 * 2 ** attempt));

/**
 * Writes a record the daemon learns the job's fate from, whatever it takes: the first failure
 * frees the reserve, later ones wait and try again, each logged with its path. The supervisor
 * stays alive meanwhile, so observers see a live supervisor (the outcome still to come), never
 * a gone one with no record (LOST); once space returns, the record lands.
 */
export function writeKept(
  dir: string,
  path: string,
  data: string,
  log: Log,
  sleep: RetrySleep,
): void {
  try {
    writeFileDurable(path, data);
    return;
  } catch {
    // No room: the record goes into the reserve's own blocks, below.
  }
  if (intoReserve(dir, path, data)) return;
  keepTrying(dir, path, () => writeFileDurable(path, data), log, sleep);
}

/**
 * The record written over the reserve's first bytes (blocks it already holds, so no free
 * space is needed), the rest cut off, and the reserve renamed to the record's name. Freeing
 * the reserve and writing afresh lost that room to whoever wrote next: the daemon's database
 * and its WAL checkpointer, which retries on a full disk, took it first, and a job that had
 * run stayed without its end record (1 run in 3 on a full tmpfs). False: no reserve, or the
 * record is larger than it; the caller frees it and retries as before.
 */
function intoReserve(dir: string, path: string, data: string): boolean {
  const reserve = join(dir, END_RESERVE);
  const bytes = new TextEncoder().encode(data);
  if (!existsSync(reserve) || bytes.length > END_RESERVE_BYTES) return false;
  try {
    const fd = openSync(reserve, "r+");
    try {
      writeSync(fd, bytes, 0, bytes.length, 0);
      ftruncateSync(fd, bytes.length);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(reserve, path);
    fsyncDir(dir);
    return true;
  } catch {
    return false;
  }
}

/**
 * `write` (of `path`) until it lands, as writeKept does. `write` must leave nothing behind
 * when it throws (a half-appended line would corrupt the next one).
 */
export function keepTrying(
  dir: string,
  path: string,
  write: () => void,
  log: Log,
  sleep: RetrySleep,
): void {
  for (let attempt = 0; ; attempt += 1) {
    try {
      write();
      return;
    } catch (error) {
      try {
        log.error("cannot write a job record; retrying until it can be written", {
          path,
          error: String(error),
          attempt,
        });
      } catch {
        // The supervisor's own log is on the same full disk: the retry matters more.
      }
      const reserve = join(dir, END_RESERVE);
      if (existsSync(reserve)) rmSync(reserve, { force: true });
      else sleep(attempt);
    }
  }
}
