/**
 * The job records directory, read and written: a record created all or nothing, a job
 * withdrawn before any supervisor claims it, a durable cancel request, the tokens recorded,
 * and the temporaries a crash left behind. Layout and formats: records.ts.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { open as openAsync, rename as renameAsync, rm as rmAsync } from "node:fs/promises";
import { join } from "node:path";
import { errorCode, publishExclusive, writeFileDurable } from "../../lib/durable-fs.ts";
import type { JobSnapshot } from "./job-state.ts";
import type { LocalContext } from "./local-context.ts";
import {
  type CancelRequest,
  type Claim,
  JOB_FILES,
  type JobRecord,
  type WithdrawnOutcome,
} from "./records.ts";

/** Temporary directories older than this are leftovers of a crash, not work in progress. */
const STALE_TEMP_MS = 10 * 60 * 1000;

/**
 * Creates the job directory by renaming a complete one into place: all or nothing, and on
 * disk when this resolves. Its three fsyncs (the record, its directory, the jobs directory)
 * run on the thread pool instead of the daemon's one thread: the submissions of a burst
 * overlap theirs, which the filesystem folds into a few journal commits, and the API answers
 * meanwhile. Done synchronously, 32 submissions held the daemon 4 s (issue 34's profile).
 */
export async function createRecordDurably(
  ctx: LocalContext,
  dir: string,
  record: JobRecord,
): Promise<"Created" | "Exists"> {
  const tmp = join(ctx.jobs, `.new-${record.token}-${randomBytes(6).toString("hex")}`);
  mkdirSync(tmp, { mode: 0o700 });
  try {
    const file = await openAsync(join(tmp, JOB_FILES.record), "wx", 0o600);
    try {
      await file.chmod(0o600);
      await file.writeFile(JSON.stringify(record), "utf8");
      await file.sync();
    } finally {
      await file.close();
    }
    await fsyncDirAsync(tmp);
    try {
      await renameAsync(tmp, dir);
    } catch (error) {
      const code = errorCode(error);
      if (code === "ENOTEMPTY" || code === "EEXIST") return "Exists";
      throw error;
    }
  } finally {
    await rmAsync(tmp, { recursive: true, force: true });
  }
  await fsyncDirAsync(ctx.jobs);
  return "Created";
}

async function fsyncDirAsync(dir: string): Promise<void> {
  const handle = await openAsync(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Takes an unclaimed job away from any supervisor; false if one claimed it first. */
export function withdraw(
  ctx: LocalContext,
  dir: string,
  outcome: WithdrawnOutcome,
  message: string,
): boolean {
  const claim: Claim = { kind: "Withdrawn", outcome, message, at: ctx.clock.now() };
  const won = publishExclusive(join(dir, JOB_FILES.claim), JSON.stringify(claim));
  if (won) ctx.log.info("local job withdrawn", { dir, outcome, message });
  return won;
}

export function requestCancel(
  ctx: LocalContext,
  dir: string,
  snapshot: Exclude<JobSnapshot, { kind: "Absent" }>,
): void {
  if (snapshot.kind === "Withdrawn" || snapshot.cancel !== null) return;
  const request: CancelRequest = { requestedAt: ctx.clock.now() };
  writeFileDurable(join(dir, JOB_FILES.cancel), JSON.stringify(request));
}

/** The jobs directory vanishing is a broken install, not every job being lost. */
export function jobsDirProblem(ctx: LocalContext): string | null {
  try {
    if (!statSync(ctx.jobs).isDirectory()) return `${ctx.jobs} is not a directory`;
    return null;
  } catch (error) {
    return `job records unavailable at ${ctx.jobs}: ${String(error)}`;
  }
}

export function listTokens(ctx: LocalContext): string[] {
  return readdirSync(ctx.jobs).filter((name) => !name.startsWith("."));
}

/** Removes what a crash left between mkdir and rename, or between rename and delete. */
export function sweepTemporaries(ctx: LocalContext): void {
  // Compared with file mtimes, which the kernel stamps from the real clock.
  const now = Date.now();
  for (const name of readdirSync(ctx.jobs)) {
    if (!name.startsWith(".new-") && !name.startsWith(".trash-")) continue;
    const path = join(ctx.jobs, name);
    try {
      if (name.startsWith(".trash-") || now - statSync(path).mtimeMs > STALE_TEMP_MS) {
        rmSync(path, { recursive: true, force: true });
      }
    } catch (error) {
      ctx.log.warn("cannot remove a leftover temporary directory", { path, error: String(error) });
    }
  }
}
