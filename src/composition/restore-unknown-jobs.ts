/**
 * Local jobs that run but that a restored store does not know: started after the backup was
 * taken. The restored daemon never adopts a job it has no row for, so such a job runs to
 * its end unmanaged; restore names them once, and cancels them when asked.
 */
import { existsSync, readdirSync } from "node:fs";
import { systemClock } from "../clock.ts";
import { silentLog } from "../log.ts";
import { createLocalBackend } from "../orchestration/local/backend.ts";
import { readJobSnapshot } from "../orchestration/local/job-state.ts";
import { readBootId } from "../orchestration/local/proc.ts";
import { jobDir, jobsRoot } from "../orchestration/local/records.ts";
import { externalHandle, type SubmissionToken } from "../orchestration/models.ts";
import { selfCommand } from "../self-command.ts";

export interface UnknownJob {
  readonly token: string;
  readonly workloadId: string;
  readonly allocationId: string;
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
  jobs: readonly UnknownJob[],
): Promise<readonly string[]> {
  if (jobs.length === 0) return [];
  const backend = createLocalBackend({
    backendDir,
    selfCommand: selfCommand(),
    clock: systemClock,
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
