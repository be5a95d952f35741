/**
 * The local backend: jobs run on this machine, each as its own process group under a
 * detached supervisor (`openai4s __supervise`). Every install has it, so INV-8 reconciliation
 * is implemented for real here: the token's record is durable before any process starts,
 * and `findByToken` after a daemon restart answers from that record — the running job, its
 * exit record, or a definite absence.
 *
 * The record directory is the queue. A record that no supervisor has claimed yet (the daemon
 * died between writing it and starting the supervisor, or the supervisor is still starting)
 * is QUEUED, and the next look at it starts a supervisor; supervisors claim with link(2), so
 * however many get started for one record, the job runs once.
 *
 * Every launch goes through a LaunchWrapper (src/core/sandbox.ts): the job's
 * variables are applied inside it, never given to a host-side process, and a daemon running
 * as root runs jobs as the RunAs uid. It does not isolate sessions by itself. Given a
 * Sandbox it wraps every launch (BATCH included) in it and only then has
 * `verifySessionIsolation`; without one the method does not exist, so admission refuses
 * SESSION before anything is written.
 */

import { randomBytes } from "node:crypto";
import {
  accessSync,
  closeSync,
  constants as fsConstants,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { availableParallelism, totalmem } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { createChangeFeed } from "../../core/change-feed.ts";
import { decorateBackend } from "../../core/decorate-backend.ts";
import {
  DEFAULT_PIDS_MAX,
  externalHandle,
  isTerminal,
  type ResourceProfile,
  type SubmissionToken,
} from "../../core/models.ts";
import type {
  AllocationBackend,
  AllocationObservation,
  BackendDiagnostics,
  CancelResult,
  ChangeReportingBackend,
  FindResult,
  LaunchSandboxReporter,
  ObservationTarget,
  ObserveResult,
  SessionIsolationProvider,
  SubmitRequest,
  SubmitResult,
  TaskResult,
  TaskRunner,
  TerminalAllocationAcknowledger,
  TerminalFact,
} from "../../core/ports.ts";
import type { JobIdentities, LaunchWrapper, RunAs, Sandbox } from "../../core/sandbox.ts";
import { makeDirsBeneath } from "../../lib/beneath-fs.ts";
import type { Clock } from "../../lib/clock.ts";
import { errorCode, fsyncDir, publishExclusive, writeFileDurable } from "../../lib/durable-fs.ts";
import { type FaultPoints, noFaultPoints } from "../../lib/fault-point.ts";
import type { Log } from "../../lib/log.ts";
import { boundMount, forbiddenRoots } from "../../lib/mount-sources.ts";
import { createProgramRunner } from "../../lib/process-runner.ts";
import { plainWrapper } from "../isolation-bwrap/launch-argv.ts";
import { fixedIdentities } from "../isolation-bwrap/uid-leases.ts";
import { sweepJobCgroups } from "./cgroup-sweep.ts";
import { type JobSnapshot, observationOf, readJobSnapshot } from "./job-state.ts";
import { buildJobRecord, validateLaunch } from "./launch.ts";
import { describeEnforcement, type LimitEnforcement } from "./limit-enforcement.ts";
import { groupMayBeOurs, isAlive, readBootId, signalGroup } from "./proc.ts";
import {
  type CancelRequest,
  type Claim,
  JOB_FILES,
  type JobRecord,
  jobDir,
  jobsRoot,
  type WithdrawnOutcome,
} from "./records.ts";
import { runStep } from "./tasks.ts";

export const LOCAL_BACKEND_NAME = "local";

/** Fault points a crash test can enable (see src/lib/fault-point.ts). */
export const LOCAL_FAULT_POINTS = {
  /** The record is durable; no supervisor was started. */
  afterRecordBeforeSpawn: "local.after-record-before-spawn",
  /** The supervisor was started; the caller has not been told (no handle recorded). */
  afterSpawn: "local.after-spawn",
} as const;

/** The environment variable a WORKER launch names with `--rank-env`; one node, so rank 0. */

const DEFAULT_KILL_GRACE_MS = 5_000;
const DEFAULT_TASK_OUTPUT_CAP_BYTES = 1024 * 1024;
const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";
const DEFAULT_LANG = "C.UTF-8";

/**
 * The daemon's LANG when it names a UTF-8 locale, else C.UTF-8 (in every glibc): a service
 * started with LANG unset or POSIX gave jobs ASCII as Python's preferred encoding, and
 * science code reading UTF-8 data failed with UnicodeDecodeError.
 */
export function utf8Lang(hostLang: string | undefined): string {
  return hostLang !== undefined && /\.utf-?8(@|$)/i.test(hostLang) ? hostLang : DEFAULT_LANG;
}

/** Temporary directories older than this are leftovers of a crash, not work in progress. */
const STALE_TEMP_MS = 10 * 60 * 1000;

export interface LocalBackendOptions {
  /** The backend's private area: `StateLayout.backendDir("local")`. */
  readonly backendDir: string;
  /** The spool every request's directories lie below (reached with no link followed). */
  readonly spoolDir: string;
  /** How to re-invoke this binary (see src/lib/self-command.ts); `__supervise` is appended. */
  readonly selfCommand: readonly string[];
  readonly clock: Clock;
  readonly log: Log;
  /**
   * Where PATH and LANG for jobs come from (HOME is the job's workspace). Nothing else of it reaches a job or a
   * supervisor: the daemon's environment may hold secrets a job has no business reading.
   */
  readonly hostEnv: Readonly<Record<string, string | undefined>>;
  /** Replaces the default single profile. */
  readonly profiles?: readonly ResourceProfile[];
  /** When given, every launch runs inside it and the backend declares session isolation. */
  readonly sandbox?: Sandbox;
  /**
   * Without a sandbox: the identity jobs run as (the daemon runs as root). A sandbox brings
   * its own. Default null: jobs keep the daemon's uid (a daemon that is not root).
   */
  readonly runAs?: RunAs | null;
  /** Without a sandbox: who each launch runs as; default: `runAs` for every one. */
  readonly identities?: JobIdentities;
  /**
   * The daemon's own trees (its state dir and spool), which no mount's source may resolve
   * into; the host's /proc, /sys, /dev and /etc are added. Default: the spool and backendDir.
   */
  readonly mountForbidden?: readonly string[];
  /** Extra directories a sandboxed launch may read (e.g. the project root when from source). */
  readonly sandboxReadOnly?: readonly string[];
  readonly faults?: FaultPoints;
  /** Between SIGTERM and SIGKILL of a job's group on cancel or time limit. */
  readonly killGraceMs?: number;
  /** Per stream, for `runTask`. */
  readonly taskOutputCapBytes?: number;
  /** The worker gateway's unix socket: how workers of a profile without network dial it. */
  readonly workerSocket?: string;
  /**
   * How jobs are held to their profile's memory, processes and CPUs (detected by
   * `detectLimitEnforcement`). Default: none, said in diagnostics.
   */
  readonly limits?: LimitEnforcement;
}

export type LocalBackend = AllocationBackend &
  TaskRunner &
  ChangeReportingBackend &
  TerminalAllocationAcknowledger &
  LaunchSandboxReporter;
export type IsolatingLocalBackend = LocalBackend & SessionIsolationProvider;

/**
 * One node, every CPU, no GPU, no time limit, three quarters of the memory: the rest is the
 * daemon's, the page cache's and whoever else uses this machine (a job past it ends
 * OUT_OF_MEMORY where cgroups are in force, instead of the host's OOM killer picking).
 */
export function defaultLocalProfiles(): readonly ResourceProfile[] {
  return [
    {
      name: "default",
      description: "This machine: one node, all of its CPUs",
      kinds: ["BATCH", "SESSION"],
      resources: {
        nodes: 1,
        cpus: availableParallelism(),
        gpus: 0,
        memoryMb: Math.floor((totalmem() * 3) / 4 / 1024 ** 2),
        timeLimitSeconds: null,
      },
      pidsMax: DEFAULT_PIDS_MAX,
      network: "host",
    },
  ];
}

export function createLocalBackend(
  options: LocalBackendOptions & { readonly sandbox: Sandbox },
): IsolatingLocalBackend;
export function createLocalBackend(options: LocalBackendOptions): LocalBackend;
export function createLocalBackend(options: LocalBackendOptions): LocalBackend {
  const base = createBackend(options);
  const sandbox = options.sandbox;
  if (sandbox === undefined) return base;
  return decorateBackend(base, { verifySessionIsolation: () => sandbox.verify() });
}

type Looked =
  | { readonly kind: "Absent" }
  | { readonly kind: "Present"; readonly snapshot: Exclude<JobSnapshot, { kind: "Absent" }> };

function createBackend(options: LocalBackendOptions): LocalBackend {
  const { backendDir, clock, log, sandbox } = options;
  const wrapper: LaunchWrapper =
    sandbox ?? plainWrapper(options.identities ?? fixedIdentities(options.runAs ?? null));
  const faults = options.faults ?? noFaultPoints;
  const mountForbidden = forbiddenRoots(options.mountForbidden ?? [options.spoolDir, backendDir]);
  const killGraceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  const taskOutputCapBytes = options.taskOutputCapBytes ?? DEFAULT_TASK_OUTPUT_CAP_BYTES;
  const programs = createProgramRunner();
  const profileList = options.profiles ?? defaultLocalProfiles();
  const limits: LimitEnforcement = options.limits ?? { kind: "None", why: "none configured" };
  const selfCommand = [...options.selfCommand];
  if (selfCommand.length === 0) throw new Error("selfCommand must not be empty");
  const jobs = jobsRoot(backendDir);
  mkdirSync(jobs, { recursive: true, mode: 0o700 });
  const bootId = readBootId();
  const baseEnv: Readonly<Record<string, string>> = {
    PATH: options.hostEnv["PATH"] ?? DEFAULT_PATH,
    LANG: utf8Lang(options.hostEnv["LANG"]),
  };
  const sandboxReadOnly = unique([
    ...selfCommand.filter((p) => isAbsolute(p)).map((p) => dirname(p)),
    ...(options.sandboxReadOnly ?? []),
  ]);
  const calls: Record<string, number> = {};
  const count = (name: string) => {
    calls[name] = (calls[name] ?? 0) + 1;
  };
  /**
   * Supervisors this process started that had not claimed their job when last looked at.
   * In memory only: after a restart the first look starts another one, which is harmless
   * (the claim is exclusive) and is exactly how a record orphaned by a crash gets run.
   */
  const launching = new Map<string, Bun.Subprocess>();
  const cgroups = limits.kind === "Cgroup" ? limits.driver : null;
  /** Stale cgroups of this daemon go at start, and again whenever a job is forgotten. */
  const sweepCgroups = () => {
    if (cgroups === null) return;
    sweepJobCgroups(cgroups, backendDir, bootId, log).catch((error) =>
      log.warn("cannot sweep job cgroups", { error: String(error) }),
    );
  };
  log.info("local job limits", { enforcement: describeEnforcement(limits) });
  sweepCgroups();

  // ---------------------------------------------------------------------------------------
  // Records
  // ---------------------------------------------------------------------------------------

  /** Creates the job directory by renaming a complete one into place: all or nothing. */
  function createRecord(dir: string, record: JobRecord): "Created" | "Exists" {
    const tmp = join(jobs, `.new-${record.token}-${randomBytes(6).toString("hex")}`);
    mkdirSync(tmp, { mode: 0o700 });
    try {
      writeFileDurable(join(tmp, JOB_FILES.record), JSON.stringify(record));
      try {
        renameSync(tmp, dir);
      } catch (error) {
        const code = errorCode(error);
        if (code === "ENOTEMPTY" || code === "EEXIST") return "Exists";
        throw error;
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
    fsyncDir(jobs);
    return "Created";
  }

  /** Takes an unclaimed job away from any supervisor; false if one claimed it first. */
  function withdraw(dir: string, outcome: WithdrawnOutcome, message: string): boolean {
    const claim: Claim = { kind: "Withdrawn", outcome, message, at: clock.now() };
    const won = publishExclusive(join(dir, JOB_FILES.claim), JSON.stringify(claim));
    if (won) log.info("local job withdrawn", { dir, outcome, message });
    return won;
  }

  function requestCancel(dir: string, snapshot: Exclude<JobSnapshot, { kind: "Absent" }>): void {
    if (snapshot.kind === "Withdrawn" || snapshot.cancel !== null) return;
    const request: CancelRequest = { requestedAt: clock.now() };
    writeFileDurable(join(dir, JOB_FILES.cancel), JSON.stringify(request));
  }

  // ---------------------------------------------------------------------------------------
  // Supervisors
  // ---------------------------------------------------------------------------------------

  function startSupervisor(token: string, dir: string): void {
    count("spawnSupervisor");
    const logFd = openSync(join(dir, JOB_FILES.supervisorLog), "a", 0o600);
    try {
      const proc = Bun.spawn([...selfCommand, "__supervise", "--job-dir", dir], {
        cwd: dir,
        env: { ...baseEnv },
        // A file, never a pipe: the daemon may die, and a supervisor writing into a closed
        // pipe would die with it.
        stdio: ["ignore", logFd, logFd],
        // Its own session: a signal to the daemon's group (Ctrl-C, kill -9 of a service
        // group) does not reach it.
        detached: true,
      });
      proc.unref();
      launching.set(token, proc);
    } finally {
      closeSync(logFd);
    }
  }

  /**
   * Moves an unclaimed record forward: a cancel withdraws it; a supervisor this process
   * started that died without claiming fails it (or the next look would start another,
   * forever); no supervisor in sight starts one.
   */
  function settleUnclaimed(
    token: string,
    dir: string,
    snapshot: Extract<JobSnapshot, { kind: "Unclaimed" }>,
  ): JobSnapshot {
    if (snapshot.cancel !== null) {
      withdraw(dir, "CANCELLED", "cancelled before it started");
      return readJobSnapshot(dir, bootId);
    }
    const proc = launching.get(token);
    if (proc === undefined) {
      startSupervisor(token, dir);
      return snapshot;
    }
    if (proc.exitCode === null && proc.signalCode === null) return snapshot;
    launching.delete(token);
    withdraw(
      dir,
      "SUPERVISOR_FAILED",
      `the job's supervisor exited (${proc.signalCode ?? `code ${proc.exitCode}`}) before starting it: ${tail(join(dir, JOB_FILES.supervisorLog))}`,
    );
    return readJobSnapshot(dir, bootId);
  }

  /** A LOST job may still be running unsupervised; stop it so a new attempt is alone. */
  function stopOrphan(snapshot: Extract<JobSnapshot, { kind: "Claimed" }>): void {
    const job = snapshot.job;
    if (job === null || !groupMayBeOurs(job, bootId)) return;
    if (signalGroup(job.pid, "SIGKILL")) {
      count("signal");
      log.warn("killed the process group of a job whose supervisor is gone", {
        token: snapshot.record.token,
        group: job.pid,
      });
    }
  }

  /** One read of one record; `settle` lets it start or withdraw a pending launch. */
  function look(token: string, settle: boolean): Looked {
    const dir = jobDir(backendDir, token);
    let snapshot = readJobSnapshot(dir, bootId);
    if (snapshot.kind === "Unclaimed" && settle) snapshot = settleUnclaimed(token, dir, snapshot);
    if (snapshot.kind === "Absent") return { kind: "Absent" };
    if (snapshot.kind !== "Unclaimed") launching.delete(token);
    if (snapshot.kind === "Claimed" && snapshot.exit === null && !snapshot.supervisorAlive) {
      stopOrphan(snapshot);
    }
    return { kind: "Present", snapshot };
  }

  /** The jobs directory vanishing is a broken install, not every job being lost. */
  function jobsDirProblem(): string | null {
    try {
      if (!statSync(jobs).isDirectory()) return `${jobs} is not a directory`;
      return null;
    } catch (error) {
      return `job records unavailable at ${jobs}: ${String(error)}`;
    }
  }

  // ---------------------------------------------------------------------------------------
  // Submit
  // ---------------------------------------------------------------------------------------

  function submitOne(request: SubmitRequest): SubmitResult {
    const token = request.token;
    const problem = validateLaunch(
      request,
      profileList,
      sandbox !== undefined,
      options.workerSocket ?? null,
    );
    if (problem !== null) return { kind: "Rejected", token, message: problem };
    const handle = externalHandle(token);
    const dir = jobDir(backendDir, token);
    // Asked first, so the retry after an Unknown returns Existing instead of a second job.
    try {
      if (look(token, true).kind === "Present") return { kind: "Existing", token, handle };
    } catch (error) {
      return { kind: "Unknown", token, message: `cannot read the job record: ${String(error)}` };
    }
    let runAs: RunAs | null;
    try {
      makeDirsBeneath(options.spoolDir, [request.workspaceDir, request.allocationDir], {
        mode: 0o700,
      });
      const launch = request.launch;
      runAs = wrapper.prepare({
        spoolDir: options.spoolDir,
        workspaceDir: request.workspaceDir,
        credentialDir: launch.kind === "WORKER" ? launch.credentialDir : null,
        subject: { profile: request.profile, owner: request.owner ?? null },
      });
    } catch (error) {
      return { kind: "Rejected", token, message: `cannot prepare directories: ${String(error)}` };
    }
    let record: JobRecord;
    try {
      const declared = profileList.find((p) => p.name === request.profile)?.mounts ?? [];
      const mounts = declared.map((m) => {
        const bound = boundMount(m, runAs?.account ?? null, mountForbidden);
        if ("error" in bound) throw new Error(bound.error);
        return bound;
      });
      record = buildJobRecord(
        request,
        {
          wrapper,
          baseEnv,
          profiles: profileList,
          killGraceMs,
          sandboxReadOnly,
          now: clock.now(),
          limits,
          workerSocket: options.workerSocket ?? null,
        },
        runAs,
        mounts,
      );
    } catch (error) {
      return { kind: "Rejected", token, message: `cannot prepare the launch: ${String(error)}` };
    }
    try {
      if (createRecord(dir, record) === "Exists") return { kind: "Existing", token, handle };
    } catch (error) {
      // The rename may or may not have reached the disk: only findByToken can say.
      return { kind: "Unknown", token, message: `cannot record the job: ${String(error)}` };
    }
    faults.hit(LOCAL_FAULT_POINTS.afterRecordBeforeSpawn);
    try {
      startSupervisor(token, dir);
    } catch (error) {
      const message = `cannot start the supervisor: ${String(error)}`;
      if (withdraw(dir, "SUPERVISOR_FAILED", message)) return { kind: "Rejected", token, message };
      // Someone else's supervisor claimed it in the meantime: it is running.
      return { kind: "Created", token, handle };
    }
    faults.hit(LOCAL_FAULT_POINTS.afterSpawn);
    log.info("local job submitted", { token, allocationId: request.allocationId });
    return { kind: "Created", token, handle };
  }

  // ---------------------------------------------------------------------------------------
  // Cancel
  // ---------------------------------------------------------------------------------------

  function cancelOne(target: ObservationTarget): CancelResult {
    const dir = jobDir(backendDir, target.token);
    let snapshot = readJobSnapshot(dir, bootId);
    if (snapshot.kind === "Absent") return { kind: "Requested" };
    // Durable first: if the daemon dies before the signal lands, the supervisor (or the
    // next look at an unclaimed record) still finds the request.
    requestCancel(dir, snapshot);
    if (snapshot.kind === "Unclaimed") {
      if (withdraw(dir, "CANCELLED", "cancelled before it started")) return { kind: "Requested" };
      snapshot = readJobSnapshot(dir, bootId);
    }
    if (snapshot.kind !== "Claimed" || snapshot.exit !== null) return { kind: "Requested" };
    if (isAlive(snapshot.claim, bootId)) {
      count("signal");
      try {
        process.kill(snapshot.claim.pid, "SIGTERM");
      } catch (error) {
        if (errorCode(error) !== "ESRCH") throw error;
      }
      return { kind: "Requested" };
    }
    stopOrphan(snapshot);
    return { kind: "Requested" };
  }

  // ---------------------------------------------------------------------------------------
  // Tasks
  // ---------------------------------------------------------------------------------------

  async function runTaskOne(
    target: ObservationTarget,
    command: readonly string[],
    timeoutMs: number,
  ): Promise<TaskResult> {
    let looked: Looked;
    try {
      looked = look(target.token, false);
    } catch (error) {
      return { kind: "Unavailable", message: `cannot read the job record: ${String(error)}` };
    }
    if (looked.kind === "Absent") return { kind: "Refused", message: "no such allocation here" };
    const snapshot = looked.snapshot;
    const observation = observationOf(snapshot);
    if (snapshot.kind !== "Claimed" || observation.kind !== "Observed") {
      return { kind: "Refused", message: "the allocation is not running" };
    }
    if (observation.phase !== "RUNNING") {
      return { kind: "Refused", message: `the allocation is ${observation.phase}, not RUNNING` };
    }
    if (command.length === 0) return { kind: "Refused", message: "empty command" };
    count("runTask");
    return runStep(snapshot.record, command, {
      wrapper,
      sandboxReadOnly,
      programs,
      timeoutMs,
      outputCapBytes: taskOutputCapBytes,
      // The same end time the job's own variable and the observation carry.
      deadlineMs: observation.deadlineAt ?? null,
    });
  }

  // ---------------------------------------------------------------------------------------
  // The port
  // ---------------------------------------------------------------------------------------

  function observeOne(target: ObservationTarget): AllocationObservation {
    if ((target.handle as string) !== target.token) {
      return { kind: "Indeterminate", message: `handle ${target.handle} is not a local handle` };
    }
    try {
      const looked = look(target.token, true);
      if (looked.kind === "Absent") {
        return {
          kind: "Observed",
          phase: "LOST",
          reason: "NOT_FOUND_BY_BACKEND",
          message: "no record of this job on this machine",
          exitCode: null,
          startedAt: null,
          endedAt: null,
        };
      }
      return observationOf(looked.snapshot);
    } catch (error) {
      return { kind: "Indeterminate", message: `cannot read the job record: ${String(error)}` };
    }
  }

  function listTokens(): string[] {
    return readdirSync(jobs).filter((name) => !name.startsWith("."));
  }

  /** Removes what a crash left between mkdir and rename, or between rename and delete. */
  function sweepTemporaries(): void {
    // Compared with file mtimes, which the kernel stamps from the real clock.
    const now = Date.now();
    for (const name of readdirSync(jobs)) {
      if (!name.startsWith(".new-") && !name.startsWith(".trash-")) continue;
      const path = join(jobs, name);
      try {
        if (name.startsWith(".trash-") || now - statSync(path).mtimeMs > STALE_TEMP_MS) {
          rmSync(path, { recursive: true, force: true });
        }
      } catch (error) {
        log.warn("cannot remove a leftover temporary directory", { path, error: String(error) });
      }
    }
  }

  // Random per process: a cursor from before a restart is expired, never trusted.
  const feed = createChangeFeed(randomBytes(8).toString("hex"));

  return {
    name: LOCAL_BACKEND_NAME,

    profiles: () => profileList,

    launchesSandboxed: () => wrapper.sandboxed,

    async submit(requests) {
      count("submit");
      const results = new Map<SubmissionToken, SubmitResult>();
      for (const request of requests) results.set(request.token, submitOne(request));
      return results;
    },

    async observe(targets) {
      count("observe");
      const problem = jobsDirProblem();
      if (problem !== null)
        return { kind: "Unavailable", message: problem } satisfies ObserveResult;
      const observations = new Map<string, AllocationObservation>();
      for (const target of targets) observations.set(target.allocationId, observeOne(target));
      return { kind: "Observed", observations };
    },

    /**
     * The reconciler's focused tick for local jobs: every watched record is read, as a full
     * observe would read every target (the same reads, so the same decisions: a record gone
     * is LOST, an unreadable one Indeterminate), and only what differs from the last answer
     * goes back, so the tick looks at those workloads alone.
     */
    async observeChanges(cursor, targets) {
      count("observe");
      const opening = feed.open(cursor, targets);
      if (opening.kind === "CursorExpired") return opening;
      const problem = jobsDirProblem();
      if (problem !== null) return { kind: "Unavailable", message: problem };
      const observations = new Map<string, AllocationObservation>();
      for (const { target } of opening.watched.values()) {
        observations.set(target.allocationId, observeOne(target));
      }
      return feed.answer(opening, targets, observations);
    },

    async cancel(targets) {
      count("cancel");
      const results = new Map<string, CancelResult>();
      for (const target of targets) {
        try {
          results.set(target.allocationId, cancelOne(target));
        } catch (error) {
          results.set(target.allocationId, { kind: "Unavailable", message: String(error) });
        }
      }
      return results;
    },

    async findByToken(tokens) {
      count("findByToken");
      const problem = jobsDirProblem();
      const results = new Map<SubmissionToken, FindResult>();
      for (const token of tokens) {
        if (problem !== null) {
          results.set(token, { kind: "Unavailable", message: problem });
          continue;
        }
        try {
          const looked = look(token, true);
          results.set(
            token,
            looked.kind === "Absent"
              ? { kind: "Absent" }
              : {
                  kind: "Found",
                  handle: externalHandle(token),
                  observation: observationOf(looked.snapshot),
                },
          );
        } catch (error) {
          results.set(token, { kind: "Unavailable", message: String(error) });
        }
      }
      return results;
    },

    async diagnostics(): Promise<BackendDiagnostics> {
      const problems: string[] = [];
      const jobsProblem = jobsDirProblem();
      if (jobsProblem !== null) problems.push(jobsProblem);
      try {
        accessSync(jobs, fsConstants.W_OK);
      } catch (error) {
        problems.push(`job records not writable: ${String(error)}`);
      }
      const [executable] = selfCommand;
      try {
        if (executable !== undefined) accessSync(executable, fsConstants.X_OK);
      } catch (error) {
        problems.push(`cannot execute ${executable}: ${String(error)}`);
      }
      let recorded = 0;
      try {
        recorded = listTokens().length;
      } catch {
        // Already reported as a jobs directory problem.
      }
      return {
        backend: LOCAL_BACKEND_NAME,
        healthy: problems.length === 0,
        message:
          problems.length === 0
            ? `${recorded} job records, ${launching.size} supervisors starting${sandbox === undefined ? "" : `, sandbox ${sandbox.mechanism}`}; limits: ${describeEnforcement(limits)}`
            : problems.join("; "),
        calls: { ...calls },
      };
    },

    async runTask(target, command, taskOptions) {
      return runTaskOne(target, command, taskOptions.timeoutMs);
    },

    async pendingTerminalFacts() {
      sweepTemporaries();
      const facts: TerminalFact[] = [];
      for (const token of listTokens()) {
        try {
          // Read-only: a sweep must not start jobs the database may not know about.
          const looked = look(token, false);
          if (looked.kind === "Absent") continue;
          const observation = observationOf(looked.snapshot);
          if (observation.kind === "Observed" && isTerminal(observation.phase)) {
            facts.push({ token: token as SubmissionToken });
          }
        } catch (error) {
          log.warn("cannot read a local job record", { token, error: String(error) });
        }
      }
      return facts;
    },

    async acknowledgeTerminal(token) {
      const looked = look(token, false);
      if (looked.kind === "Absent") return;
      const observation = observationOf(looked.snapshot);
      if (observation.kind !== "Observed" || !isTerminal(observation.phase)) {
        log.warn("refusing to forget a local job that has not ended", { token });
        return;
      }
      // Renamed away first: a crash half way through deleting must not leave a record
      // without its claim, which would read as "never started" and run the job again.
      const trash = join(jobs, `.trash-${token}-${randomBytes(6).toString("hex")}`);
      renameSync(jobDir(backendDir, token), trash);
      fsyncDir(jobs);
      rmSync(trash, { recursive: true, force: true });
      sweepCgroups();
    },
  };
}

/** The last few hundred bytes of a log, for a message that explains a failure. */
function tail(path: string, maxBytes = 600): string {
  try {
    const fd = openSync(path, "r");
    try {
      const size = statSync(path).size;
      const length = Math.min(size, maxBytes);
      const buffer = Buffer.alloc(length);
      readSync(fd, buffer, 0, length, size - length);
      const text = buffer.toString("utf8").trim();
      return text.length === 0 ? "(no output)" : text;
    } finally {
      closeSync(fd);
    }
  } catch {
    return "(no supervisor log)";
  }
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}
