/**
 * Local jobs that run but that a restored store does not know: started after the backup was
 * taken. The restored daemon never adopts a job it has no row for, so such a job runs to
 * its end unmanaged; restore names them once, and cancels them when asked.
 */

import { chownSync, existsSync, mkdirSync, readdirSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";
import { externalHandle, type SubmissionToken } from "../../core/models.ts";
import type { UnknownJob } from "../../core/ports/backend-plugin.ts";
import type { LaunchWrapper } from "../../core/sandbox.ts";
import { type Clock, sleep } from "../../lib/clock.ts";
import { silentLog } from "../../lib/log.ts";
import { selfCommand } from "../../lib/self-command.ts";
import { createLocalBackend } from "./backend.ts";
import { readJobSnapshot } from "./job-state.ts";
import { readBootId } from "./proc.ts";
import { jobDir, jobsRoot } from "./records.ts";

/**
 * Where restore moves the records of ended jobs the copy does not know. Left among the jobs,
 * each made the restored daemon warn "a terminal fact for a token the store does not know"
 * at every start, forever (issue 19). Moved, not deleted: they are the only trace of those
 * jobs. The name starts with no dot and lies outside `jobs/`, so no sweep reads it.
 */
export function setAsideDir(backendDir: string, stamp: string): string {
  return join(backendDir, `unknown-at-restore-${stamp}`);
}

function ended(backendDir: string, token: string, bootId: string): boolean {
  const snapshot = readJobSnapshot(jobDir(backendDir, token), bootId);
  return snapshot.kind === "Withdrawn" || (snapshot.kind === "Claimed" && snapshot.exit !== null);
}

/**
 * Moves the records of every ended job unknown to the copy aside, owned like the backend's
 * directory (restore may run as root for a service account's daemon); returns their tokens.
 */
export function setAsideEndedUnknownJobs(
  backendDir: string,
  knownTokens: ReadonlySet<string>,
  stamp: string,
): readonly string[] {
  const root = jobsRoot(backendDir);
  if (!existsSync(root)) return [];
  const bootId = readBootId();
  const moved: string[] = [];
  const aside = setAsideDir(backendDir, stamp);
  for (const token of readdirSync(root).sort()) {
    if (token.startsWith(".") || knownTokens.has(token)) continue;
    if (!ended(backendDir, token, bootId)) continue;
    if (moved.length === 0) {
      mkdirSync(aside, { mode: 0o700 });
      const owner = statSync(backendDir);
      chownSync(aside, owner.uid, owner.gid);
    }
    renameSync(jobDir(backendDir, token), join(aside, token));
    moved.push(token);
  }
  return moved;
}

/** Waits (polling the records) until every job in `jobs` has ended, or `timeoutMs` passed. */
export async function waitUntilEnded(
  backendDir: string,
  jobs: readonly UnknownJob[],
  timeoutMs: number,
): Promise<void> {
  const bootId = readBootId();
  const deadline = Date.now() + timeoutMs;
  while (!jobs.every((j) => ended(backendDir, j.token, bootId)) && Date.now() < deadline) {
    await sleep(100);
  }
}

/** Jobs with a record in `backendDir` that have not ended and whose token is not known. */
export function unknownRunningJobs(
  backendDir: string,
  knownTokens: ReadonlySet<string>,
): readonly UnknownJob[] {
  const root = jobsRoot(backendDir);
  if (!existsSync(root)) return [];
  const bootId = readBootId();
  const unknown: UnknownJob[] = [];
  for (const token of readdirSync(root).sort()) {
    // Dot entries are the backend's temporaries and trash, not jobs.
    if (token.startsWith(".") || knownTokens.has(token)) continue;
    const snapshot = readJobSnapshot(jobDir(backendDir, token), bootId);
    const running =
      snapshot.kind === "Unclaimed" || (snapshot.kind === "Claimed" && snapshot.exit === null);
    if (!running) continue;
    const { workloadId, allocationId } = snapshot.record;
    unknown.push({ token, workloadId, allocationId });
  }
  return unknown;
}

/** Asks each job's supervisor to stop it, exactly as a cancel through the daemon does. */
export async function cancelUnknownJobs(
  backendDir: string,
  /** The spool the backend is built over (a cancel creates nothing there). */
  spoolDir: string,
  jobs: readonly UnknownJob[],
  clock: Clock,
  plainLaunch: LaunchWrapper,
): Promise<readonly string[]> {
  if (jobs.length === 0) return [];
  const backend = createLocalBackend({
    backendDir,
    spoolDir,
    selfCommand: selfCommand(),
    clock,
    plainLaunch,
    log: silentLog,
    hostEnv: {},
  });
  const results = await backend.cancel(
    jobs.map((j) => ({
      allocationId: j.allocationId,
      token: j.token as SubmissionToken,
      handle: externalHandle(j.token),
    })),
  );
  const problems: string[] = [];
  for (const j of jobs) {
    const result = results.get(j.allocationId);
    if (result?.kind !== "Requested") {
      problems.push(
        `${j.workloadId}: ${result && "message" in result ? result.message : "no answer"}`,
      );
    }
  }
  return problems;
}
