/**
 * What `openai4s restore` does about jobs the copy does not know (started after it): of
 * every backend that keeps job records in the state dir (the local one), the running ones
 * are listed and, when asked, stopped, and the records of the ended ones are set aside; a
 * backend that keeps none here (a cluster's) is named, its jobs being the orphan sweep's.
 */
import { existsSync } from "node:fs";
import { plainWrapper } from "../../adapters/isolation-bwrap/launch-argv.ts";
import { fixedIdentities } from "../../adapters/isolation-bwrap/uid-leases.ts";
import type { StateLayout } from "../../core/layout.ts";
import type { BackendRestoreHelpers, UnknownJob } from "../../core/ports/backend-plugin.ts";
import type { Clock } from "../../lib/clock.ts";
import { BACKENDS } from "./composition/backends.ts";

/** How long restore waits for cancelled unknown jobs to end before moving their records. */
const STOP_WAIT_MS = 30_000;

/** The launch a backend built to cancel is given: it starts nothing, as the daemon's uid. */
const RESTORE_LAUNCH = plainWrapper(fixedIdentities(null));

export interface UnknownJobs {
  readonly running: readonly UnknownJob[];
  /** Why a job could not be asked to stop, one line each. */
  readonly problems: readonly string[];
  /** Where the records of ended unknown jobs went (null: there were none). */
  readonly setAside: { readonly count: number; readonly dir: string } | null;
  /**
   * Backends this state dir has used that keep no job records here (a cluster's): their
   * jobs are not listed by restore, and the summary says so rather than "no job unknown".
   */
  readonly notListed: readonly string[];
}

/**
 * The jobs the copy does not know, of every backend that keeps records of its own (the
 * local one; a cluster's are the orphan sweep's): listed, stopped when asked, ended ones set
 * aside.
 */
export async function unknownJobs(
  layout: StateLayout,
  tokens: ReadonlySet<string>,
  request: { readonly cancel: boolean; readonly stamp: string; readonly clock: Clock },
): Promise<UnknownJobs> {
  const running: UnknownJob[] = [];
  const problems: string[] = [];
  let setAside: UnknownJobs["setAside"] = null;
  for (const backend of BACKENDS) {
    if (backend.restore === null) continue;
    const found = await unknownJobsOf(backend.restore, layout, backend.name, tokens, request);
    running.push(...found.running);
    problems.push(...found.problems);
    setAside = found.setAside ?? setAside;
  }
  const notListed = BACKENDS.filter(
    (b) => b.restore === null && existsSync(layout.backendDir(b.name)),
  ).map((b) => b.name);
  return { running, problems, setAside, notListed };
}

async function unknownJobsOf(
  restore: BackendRestoreHelpers,
  layout: StateLayout,
  name: string,
  tokens: ReadonlySet<string>,
  {
    cancel,
    stamp,
    clock,
  }: { readonly cancel: boolean; readonly stamp: string; readonly clock: Clock },
): Promise<UnknownJobs> {
  const dir = layout.backendDir(name);
  const running = restore.unknownRunningJobs(dir, tokens);
  const problems = cancel
    ? await restore.cancelUnknownJobs(dir, layout.spool, running, clock, RESTORE_LAUNCH)
    : [];
  // Their supervisors stop them within the kill grace: then their records go aside too.
  if (cancel && problems.length === 0) await restore.waitUntilEnded(dir, running, STOP_WAIT_MS);
  const moved = restore.setAsideEndedUnknownJobs(dir, tokens, stamp);
  const setAside =
    moved.length === 0 ? null : { count: moved.length, dir: restore.setAsideDir(dir, stamp) };
  return { running, problems, setAside, notListed: [] };
}

export function unknownJobLines(jobs: UnknownJobs, cancelled: boolean): string[] {
  const unknown = jobs.running;
  const aside =
    jobs.setAside === null
      ? []
      : [
          `records of ${jobs.setAside.count} ended job(s) unknown to the copy moved to ${jobs.setAside.dir}`,
        ];
  // On a cluster, "no running local job is unknown" alone read as if the cluster's jobs had
  // been checked too: they are the orphan sweep's, once the daemon runs.
  const elsewhere = jobs.notListed.map(
    (name) =>
      `jobs of the ${name} backend are not checked here: the daemon's orphan sweep reports those the copy does not know once it runs (backend.orphans in /v1/diagnostics; OPENAI4S_ORPHAN_POLICY=cancel cancels them)`,
  );
  if (unknown.length === 0) {
    return ["no running local job is unknown to the copy", ...elsewhere, ...aside];
  }
  return [
    `${unknown.length} local job(s) run but are unknown to the copy (started after it)${
      cancelled
        ? ": asked to stop"
        : "; the daemon will not manage them: restore again with --cancel-unknown-jobs to stop them, or let them end"
    }:`,
    ...unknown.map((j) => `  ${j.workloadId} (allocation ${j.allocationId}, token ${j.token})`),
    ...elsewhere,
    ...aside,
  ];
}
