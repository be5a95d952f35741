/**
 * The supervisor's side of a job's cgroup: created (idempotently, so a record that outlived
 * a reboot still gets one) right before the job starts, watched while it runs, and emptied,
 * read and removed when it ends.
 *
 * Watched because cgroup v1 has no group OOM kill: the kernel kills the biggest process and
 * the rest carry on (a multiprocessing parent whose worker died waits forever). When the
 * kill count moves, the whole job is ended, as v2's memory.oom.group and a scheduler do.
 */
import { every, sleep, type Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { CgroupDriver, CgroupUsage, JobCgroup } from "./cgroup-port.ts";
import { driverForJob } from "./limit-enforcement.ts";
import type { JobLimits } from "./records.ts";

const WATCH_INTERVAL_MS = 500;
/** How long the killed job's processes get to leave the cgroup before it is removed. */
const DRAIN_WAIT_MS = 3_000;
const DRAIN_POLL_MS = 20;
const CREATE_ATTEMPTS = 3;

export interface JobCgroupGuard {
  /** Creates the cgroup with its limits. Throws when it cannot: the job must not start. */
  start(): void;
  /** Calls `onOutOfMemory` once, the first time an OOM kill is seen. */
  watch(onOutOfMemory: () => void): void;
  /** Kills what is left, reads the counters, removes the cgroup. */
  finish(): Promise<CgroupUsage>;
}

export function jobCgroupGuard(
  limits: JobLimits | undefined,
  log: Log,
  timers: Timers,
): JobCgroupGuard | null {
  const job = limits?.cgroup ?? null;
  if (limits === undefined || job === null) return null;
  const driver = driverForJob(job);
  let stopWatch: (() => void) | null = null;
  return {
    start() {
      // Retried: the last job of another supervisor may remove the daemon's root between
      // this one's mkdir of it and of the job's own directory.
      for (let attempt = 1; ; attempt++) {
        try {
          driver.create(job, limits);
          return;
        } catch (error) {
          if (attempt >= CREATE_ATTEMPTS) throw error;
        }
      }
    },
    watch(onOutOfMemory) {
      stopWatch = every(timers, WATCH_INTERVAL_MS, () => {
        try {
          if (driver.usage(job).oomKills === 0) return;
        } catch (error) {
          log.warn("cannot read the job's cgroup", { error: String(error) });
          return;
        }
        stopWatch?.();
        stopWatch = null;
        onOutOfMemory();
        driver.kill(job);
      });
    },
    async finish() {
      stopWatch?.();
      stopWatch = null;
      const usage = await drainAndRemove(driver, job, log);
      // The last job out removes the daemon's root, whether or not the daemon is still there
      // to do it (a daemon killed by SIGKILL never runs its own cleanup). Busy: not the last.
      try {
        driver.removeRoot();
      } catch {
        // Left for the next start's sweep.
      }
      return usage;
    },
  };
}

/** Kill, read, wait for the processes to leave, remove; a cgroup still busy is logged. */
export async function drainAndRemove(
  driver: CgroupDriver,
  job: JobCgroup,
  log: Log,
): Promise<CgroupUsage> {
  let usage: CgroupUsage = { oomKills: 0, peakMemoryBytes: null, pidsRefused: 0 };
  try {
    driver.kill(job);
    usage = driver.usage(job);
    for (let waited = 0; waited < DRAIN_WAIT_MS; waited += DRAIN_POLL_MS) {
      if (driver.processes(job).length === 0) break;
      await sleep(DRAIN_POLL_MS);
    }
    if (!driver.remove(job))
      log.warn("the job's cgroup is still busy; left for the sweep", { job });
  } catch (error) {
    log.warn("cannot clean up the job's cgroup", { job, error: String(error) });
  }
  return usage;
}
