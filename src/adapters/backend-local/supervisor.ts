/**
 * The supervisor: one small process per local job, started detached (its own session, stdio
 * on a file) so a `kill -9` of the daemon does not take it or the job with it. It is the only
 * parent the job has, so it is the only process that can learn the job's exit status: that
 * is why it, not the daemon, writes the exit record, and writes it durably before it exits
 * (observers rely on that order to tell "finished" from "lost").
 *
 * Exactly-once: a supervisor first claims the job with link(2); a second supervisor for the
 * same record (a daemon that restarted while the first was still starting) loses the race
 * and exits without starting anything. A job array has one supervisor too, which runs each
 * element through the same code as a single job (array-supervisor.ts).
 *
 * Over 400 lines because the one process a job has keeps its claim, its limits, its stop
 * and its durable end record together; the timers it now takes from its entry point
 * (supervise-command.ts) added the last lines.
 */
import { closeSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { DEADLINE_ENV, deadlineEnvValue } from "../../core/deadline-env.ts";
import type { Timers } from "../../lib/clock.ts";
import { errorCode, publishExclusive } from "../../lib/durable-fs.ts";
import type { Log } from "../../lib/log.ts";
import { FULL_BELOW_BYTES, formatBytes, readSpace, type StatFs } from "../../lib/spool-space.ts";
import { superviseArray } from "./array-supervisor.ts";
import { outOfMemoryMessage, pidsNote } from "./job-limits.ts";
import { openJobLog } from "./job-log.ts";
import { jobDeadlineMs, signalName } from "./job-state.ts";
import { END_RESERVE, RETRY_SLEEP, reserveEndRoom, writeKept } from "./kept-records.ts";
import { identify, readProcStat, signalGroup } from "./proc.ts";
import {
  type Claim,
  type ExitReason,
  type ExitRecord,
  JOB_FILES,
  type JobRecord,
  type JobStart,
  jobRecordSchema,
  readJobFile,
} from "./records.ts";
import { jobCgroupGuard } from "./supervisor-limits.ts";

export interface SupervisorDeps {
  readonly now: () => number;
  /** The kill grace, the time limit and its warning (from the supervise entry point). */
  readonly timers: Timers;
  readonly bootId: string;
  readonly log: Log;
  /** How the spool's free space is read when a job fails (tests replace it). */
  readonly statfs?: StatFs;
}

export type StopReason = Extract<ExitReason, "TIME_LIMIT" | "CANCELLED" | "TERMINATED">;

/**
 * One process the supervisor runs to its end, and where its start and end are recorded: the
 * job itself (job.json, exit.json), or one element of an array (array-supervisor.ts).
 */
export interface SupervisedRun {
  /** What runs: its argv, environment, logs, limits and time limit. */
  readonly record: JobRecord;
  /** Set in the launch's host-side environment, copied into the job by name (its index). */
  readonly extraEnv: Readonly<Record<string, string>>;
  readonly cancelRequested: () => boolean;
  readonly started: (start: JobStart) => void;
  readonly ended: (exit: ExitRecord) => void;
}

/** The job's own run: recorded in its directory's job.json and exit.json. */
function singleRun(dir: string, record: JobRecord, log: Log): SupervisedRun {
  return {
    record,
    extraEnv: {},
    cancelRequested: () => existsSync(join(dir, JOB_FILES.cancel)),
    started: (start) =>
      writeKept(dir, join(dir, JOB_FILES.job), JSON.stringify(start), log, RETRY_SLEEP),
    ended: (exit) => writeExit(dir, log, exit),
  };
}

const STOP_SIGNALS = ["SIGTERM", "SIGINT"] as const;

/** Runs one job to its end. Returns the supervisor's own exit code. */
export async function runSupervisor(dir: string, deps: SupervisorDeps): Promise<number> {
  const record = readJobFile(dir, JOB_FILES.record, jobRecordSchema);
  if (record === null) {
    deps.log.error("no job record", { dir });
    return 1;
  }
  const self = identify(process.pid, deps.bootId);
  if (self === null) throw new Error("cannot read this process's own /proc entry");

  // Installed BEFORE the claim: once the claim names this process, a cancel may signal it at
  // any moment, and the default action (die) would leave a claimed job with no exit record.
  let signalled = false;
  let onStop: (reason: StopReason) => void = () => {};
  const stopReasonFromSignal = (): StopReason =>
    existsSync(join(dir, JOB_FILES.cancel)) ? "CANCELLED" : "TERMINATED";
  const handler = () => {
    signalled = true;
    onStop(stopReasonFromSignal());
  };
  for (const s of STOP_SIGNALS) process.on(s, handler);
  // Detached from any terminal, but a stray hangup must not kill the job's only witness.
  const ignore = () => {};
  process.on("SIGHUP", ignore);
  try {
    try {
      reserveEndRoom(dir);
    } catch (error) {
      // Unclaimed, nothing started: the daemon withdraws it as its supervisor's failure.
      deps.log.error("no room for the job's records; not starting it", {
        path: join(dir, END_RESERVE),
        error: String(error),
      });
      return 1;
    }
    const claim: Claim = { kind: "Supervisor", ...self, claimedAt: deps.now() };
    if (!publishExclusive(join(dir, JOB_FILES.claim), JSON.stringify(claim))) {
      deps.log.info("job already claimed by another supervisor; not starting it", { dir });
      return 0;
    }
    deps.log.info("claimed job", { dir, token: record.token });
    try {
      if (signalled || existsSync(join(dir, JOB_FILES.cancel))) {
        writeExit(dir, deps.log, {
          reason: signalled ? stopReasonFromSignal() : "CANCELLED",
          exitCode: null,
          signal: null,
          message: "cancelled before it started",
          startedAt: null,
          endedAt: deps.now(),
        });
        return 0;
      }
      const setOnStop = (install: (reason: StopReason) => void) => {
        onStop = install;
      };
      if (record.array !== undefined) {
        return await superviseArray(dir, record, deps, setOnStop, (run, install) =>
          superviseJob(run, deps, install),
        );
      }
      return await superviseJob(singleRun(dir, record, deps.log), deps, setOnStop);
    } finally {
      // After the exit record, so the end is reported without waiting for a large /tmp.
      if (record.sharedTmpDir !== undefined) removeSharedTmp(record, deps.log);
    }
  } finally {
    for (const s of STOP_SIGNALS) process.off(s, handler);
    process.off("SIGHUP", ignore);
  }
}

type JobProcess = Bun.Subprocess<"ignore", number, number>;

/**
 * The job's process, in its own session and group, its output appended to its logs; null
 * when it could not start (its exit record then says why, as the shell would).
 */
function startJob(
  run: SupervisedRun,
  deadline: number | null,
  deps: SupervisorDeps,
): JobProcess | null {
  const record = run.record;
  try {
    mkdirSync(dirname(record.stdoutPath), { recursive: true, mode: 0o700 });
    mkdirSync(dirname(record.stderrPath), { recursive: true, mode: 0o700 });
    const out = openJobLog(record.stdoutPath);
    let err: number;
    try {
      err = openJobLog(record.stderrPath);
    } catch (error) {
      closeSync(out);
      throw error;
    }
    try {
      return Bun.spawn([...record.argv], {
        cwd: record.cwd,
        // The launch argv copies the deadline into the job's environment by name.
        env:
          deadline === null
            ? { ...record.env, ...run.extraEnv }
            : { ...record.env, ...run.extraEnv, [DEADLINE_ENV]: deadlineEnvValue(deadline) },
        stdio: ["ignore", out, err],
        // Its own session and process group: cancel and time limits signal the group, so
        // grandchildren die with it.
        detached: true,
      });
    } finally {
      closeSync(out);
      closeSync(err);
    }
  } catch (error) {
    const code = errorCode(error);
    run.ended({
      // No room for even its log files: the spool's fault, not the command's.
      reason: code === "ENOSPC" ? "SPOOL_FULL" : "LAUNCH_FAILED",
      // The shell's conventions: 127 "command not found", 126 "cannot execute".
      exitCode: code === "ENOENT" ? 127 : 126,
      signal: null,
      message: `could not start ${JSON.stringify(record.argv[0])}: ${String(error)}`,
      startedAt: null,
      endedAt: deps.now(),
    });
    return null;
  }
}

/** The exit record: how the job ended, why, and what the limits and the spool had to do with it. */
function writeJobEnd(
  run: SupervisedRun,
  deps: SupervisorDeps,
  ended: {
    readonly proc: JobProcess;
    readonly finalReason: ExitReason;
    readonly usage: Awaited<
      ReturnType<NonNullable<ReturnType<typeof jobCgroupGuard>>["finish"]>
    > | null;
    readonly outOfMemory: boolean;
    readonly startedAt: number;
  },
): void {
  const { proc, finalReason, usage, outOfMemory, startedAt } = ended;
  const record = run.record;
  const signal = signalName(proc.signalCode);
  const how = signal !== null ? `killed by ${signal}` : `exited with code ${proc.exitCode}`;
  const why =
    finalReason === "TIME_LIMIT"
      ? ` after its time limit of ${record.timeLimitSeconds} s`
      : finalReason === "CANCELLED"
        ? " after a cancel request"
        : finalReason === "TERMINATED"
          ? " after its supervisor was signalled"
          : "";
  const failed = finalReason === "EXITED" && (signal !== null || proc.exitCode !== 0);
  const full = failed ? spoolFullNote(dirname(record.stdoutPath), deps.statfs) : null;
  const note = usage === null || record.limits === undefined ? "" : pidsNote(record.limits, usage);
  run.ended({
    reason: full === null ? finalReason : "SPOOL_FULL",
    exitCode: proc.exitCode,
    signal,
    message:
      full !== null
        ? `${how}; ${full}`
        : outOfMemory && record.limits !== undefined && usage !== null
          ? outOfMemoryMessage(record.limits, usage)
          : `${how}${why}${note}`,
    startedAt,
    endedAt: deps.now(),
  });
}

async function superviseJob(
  run: SupervisedRun,
  deps: SupervisorDeps,
  setOnStop: (onStop: (reason: StopReason) => void) => void,
): Promise<number> {
  const record = run.record;
  const startedAt = deps.now();
  const deadline = jobDeadlineMs(startedAt, record.timeLimitSeconds);
  const limits = jobCgroupGuard(record.limits, deps.log, deps.timers);
  try {
    limits?.start();
  } catch (error) {
    // Fail closed: a job whose cgroup cannot be made does not run unlimited.
    run.ended({
      reason: "LAUNCH_FAILED",
      exitCode: 126,
      signal: null,
      message: `could not create the job's cgroup: ${String(error)}`,
      startedAt: null,
      endedAt: deps.now(),
    });
    return 0;
  }
  const proc = startJob(run, deadline, deps);
  if (proc === null) return 0;
  const group = proc.pid;
  const leaderStat = readProcStat(group);
  const jobStart: JobStart = {
    pid: group,
    startTicks: leaderStat?.startTicks ?? "0",
    bootId: deps.bootId,
    startedAt,
  };
  run.started(jobStart);
  deps.log.info("started job", { pid: group, argv0: record.argv[0] });

  // Mutated from signal handlers and timers; an object so the compiler does not narrow it.
  const state: {
    exited: boolean;
    stopReason: StopReason | null;
    cancelKill: (() => void) | null;
  } = { exited: false, stopReason: null, cancelKill: null };
  limits?.watch(() => deps.log.warn("the job hit its memory limit; ending it", { group }));
  const beginStop = (reason: StopReason) => {
    if (state.exited || state.stopReason !== null) return;
    state.stopReason = reason;
    deps.log.info("stopping job group", { reason, group });
    signalGroup(group, "SIGTERM");
    state.cancelKill = deps.timers.after(record.killGraceMs, () => signalGroup(group, "SIGKILL"));
  };
  setOnStop(beginStop);
  // A signal that arrived while the job was being started is honoured now.
  if (run.cancelRequested()) beginStop("CANCELLED");
  // Armed for the deadline the job was told and observers report, not for a full limit
  // from now: the start above took time, and the job must not outlive what it was told.
  const cancelLimit =
    deadline === null
      ? null
      : deps.timers.after(Math.max(0, deadline - deps.now()), () => beginStop("TIME_LIMIT"));

  const cancelWarn = warningTimer(record, startedAt, deadline, deps, () => {
    if (state.exited || state.stopReason !== null) return;
    deps.log.info("warning job group before its time limit", { group });
    signalGroup(group, "SIGURG");
  });

  await proc.exited;
  state.exited = true;
  cancelWarn?.();
  cancelLimit?.();
  state.cancelKill?.();
  // The allocation ends with its leader: background processes it left in the group would
  // otherwise keep holding the machine with nobody accounting for them.
  signalGroup(group, "SIGKILL");
  // The cgroup holds what left the group too (bwrap's --new-session): killed, counted, removed.
  const usage = limits === null ? null : await limits.finish();
  const outOfMemory = state.stopReason === null && usage !== null && usage.oomKills > 0;

  const finalReason: ExitReason = state.stopReason ?? (outOfMemory ? "OUT_OF_MEMORY" : "EXITED");
  writeJobEnd(run, deps, { proc, finalReason, usage, outOfMemory, startedAt });
  deps.log.info("job ended", {
    reason: finalReason,
    exitCode: proc.exitCode,
    signal: proc.signalCode,
  });
  return 0;
}

/**
 * SIGURG to the job's group before its deadline, as a cluster scheduler's --signal does: the
 * lead is the record's, never more than half the job's time (a two-minute job is not warned
 * as it starts), and the same instant the reconciler's TIME_LIMIT_NEAR event is due. SIGURG
 * is ignored unless a process catches it, so a job that does not care is not disturbed.
 */
function warningTimer(
  record: JobRecord,
  startedAt: number,
  deadline: number | null,
  deps: SupervisorDeps,
  warn: () => void,
): (() => void) | null {
  const leadSeconds = record.warnBeforeLimitSeconds ?? 0;
  if (deadline === null || leadSeconds <= 0) return null;
  const wholeMs = deadline - startedAt;
  const leadMs = Math.max(1000, Math.min(leadSeconds * 1000, Math.floor(wholeMs / 2)));
  return deps.timers.after(Math.max(0, deadline - leadMs - deps.now()), warn);
}

/**
 * Why a failed job failed when the filesystem of its logs is full as it ends: it could not
 * write (its log is often empty, the write of the error itself failed), and the user must
 * not be told their code is at fault. Null when there is room, or when nobody can tell.
 */
function spoolFullNote(logDir: string, statfs: StatFs | undefined): string | null {
  try {
    const space = readSpace(logDir, statfs);
    if (space.freeBytes >= FULL_BELOW_BYTES) return null;
    return `the spool's filesystem was full when it ended (${formatBytes(space.freeBytes)} free of ${formatBytes(space.totalBytes)}): it could not write its files or logs`;
  } catch {
    return null;
  }
}

/**
 * Empties the allocation's /tmp and /dev/shm once its job has ended: scratch, and in the
 * spool, where it would otherwise stay forever. Their contents are the job's (anything, links
 * included, and a step may still be running), so GNU rm removes them: it walks with openat
 * and O_NOFOLLOW and never follows a link or leaves the filesystem, where a path-by-path walk
 * could be steered by a directory swapped for a link into deleting the host's files.
 */
function removeSharedTmp(record: JobRecord, log: Log): void {
  const sharedTmp = record.sharedTmpDir;
  if (sharedTmp === undefined) return;
  const result = Bun.spawnSync(["rm", "-rf", "--one-file-system", "--", sharedTmp], {
    // The backend's fixed helper environment, as for the launch: nothing a request chose.
    env: { ...record.env },
    stdin: "ignore",
    stdout: "ignore",
    stderr: "pipe",
  });
  if (result.exitCode !== 0) {
    log.warn("cannot remove the job's /tmp and /dev/shm", {
      dir: sharedTmp,
      error: result.stderr.toString().slice(0, 500),
    });
  }
}

function writeExit(dir: string, log: Log, exit: ExitRecord): void {
  writeKept(dir, join(dir, JOB_FILES.exit), JSON.stringify(exit), log, RETRY_SLEEP);
  rmSync(join(dir, END_RESERVE), { force: true });
}
