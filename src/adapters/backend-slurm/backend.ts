/**
 * The AllocationBackend for a Slurm cluster. Three behaviours are load-bearing:
 *
 * 1. A lost submission is Unknown, never a failure, and `submit` begins by asking whether the
 *    token is already out there, so the retry after an Unknown returns Existing instead of a
 *    second job on the cluster (INV-8). The lookup matches JobName as well as Comment: sacct
 *    persists Comment only where the site sets AccountingStoreFlags=job_comment (and only
 *    once the job ended), while JobName is an ordinary accounting field. When the lookup
 *    cannot be answered, submit returns Unknown rather than pressing on: absence of an answer
 *    is not an answer of absence.
 * 2. A job in neither the queue nor accounting is LOST, never COMPLETED, and only on
 *    evidence: successful answers from both, for several observations over a grace period,
 *    because accounting lags the controller by seconds (a short job may first appear there
 *    under the name "allocation").
 * 3. An unreachable scheduler leaves every phase where it was (observe says Unavailable).
 *
 * Observation is batched so scheduler calls per tick stay constant as jobs grow: one squeue
 * for every target (filtered by our job names, all states, so a job that ended less than
 * MinJobAge ago is still read from the controller), and one sacct only for the targets that
 * have left the controller. Submissions of a tick share one token lookup (one squeue, one
 * sacct) and then cost one sbatch each.
 *
 * A multi-node SESSION is one launcher task per node, each worker resolving its rank from
 * SLURM_PROCID; only paths reach the job's environment and command line, never a credential
 * value. `runTask` runs a step inside the allocation the workload already holds and refuses
 * when it is not running: submitting a fresh allocation instead is exactly what INV-4 forbids.
 *
 * This backend's record has no session isolation (`sessionIsolation: null`): jobs of one
 * service account share a uid, and 0600 files do not separate them.
 */

import { closeSync, constants, mkdirSync, openSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { createChangeFeed } from "../../core/change-feed.ts";
import { DEADLINE_ENV, deadlineEnvValue } from "../../core/deadline-env.ts";
import { allocationLogPath } from "../../core/layout.ts";
import {
  externalHandle,
  isTerminal,
  type ResourceProfile,
  type SubmissionToken,
} from "../../core/models.ts";
import {
  type AllocationObservation,
  type BackendDiagnostics,
  type BackendWith,
  type CancelResult,
  type FindResult,
  NO_CAPABILITIES,
  type ObservationCursor,
  type ObservationTarget,
  type ObserveChangesResult,
  type ObserveResult,
  type SubmitRequest,
  type SubmitResult,
  type TaskResult,
} from "../../core/ports.ts";
import type { Clock } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import { type ArrayElementState, arrayObservation, collectElements } from "./array-observation.ts";
import { type BatchBody, renderBatchScript } from "./batch-script.ts";
import type { SlurmBroker } from "./broker.ts";
import type { BatchSpec } from "./broker-argv.ts";
import type { SlurmCommandError } from "./broker-outcomes.ts";
import { jobEnvRefusals } from "./broker-validation.ts";
import { explainEnding, needsUsage, usagePending } from "./end-hints.ts";
import { jobComment, type OrphanReport } from "./orphan-sweeper.ts";
import type { AccountingRow } from "./parse.ts";
import { createSqueueMemo, type QueueRow } from "./parse-squeue.ts";
import { mapJobState, mapPendingReason, normaliseState } from "./state-table.ts";

/**
 * What a profile maps to on the cluster (D5: the administrator's side of cluster.toml). The
 * profile loader adapts its own type to this.
 */
export interface SlurmPlacement {
  readonly partition: string | null;
  readonly qos: string | null;
  readonly account: string | null;
  readonly nodes: number;
  /** Per node (per task: one task per node). */
  readonly cpus: number;
  /** Per node. */
  readonly gpus: number;
  readonly memoryMb: number | null;
  readonly timeLimitSeconds: number | null;
  /** Seconds before the limit the job is warned (SIGURG); 0 turns it off; default 300. */
  readonly warnBeforeLimitSeconds?: number | null;
  /** The most tasks one BATCH may ask for (admission checks); absent: 1. */
  readonly maxTasks?: number;
  /** srun's `--mpi` for a multi-task BATCH; null or absent: the cluster's MpiDefault. */
  readonly mpi?: string | null;
}

export interface PlacementCatalog {
  /** The public view: what scientists see. No partition, no QoS. */
  profiles(): readonly ResourceProfile[];
  /** The administrator's mapping for a profile name, or null when there is no such profile. */
  placement(profile: string): SlurmPlacement | null;
}

export interface SlurmBackendOptions {
  readonly broker: SlurmBroker;
  readonly placements: PlacementCatalog;
  readonly clock: Clock;
  readonly log: Log;
  /** PATH inside jobs and steps (the daemon's own PATH never reaches a job). */
  readonly jobPath?: string;
  /**
   * HOME inside jobs: the service account's home from the password database, not the
   * daemon's $HOME. Only the variable: the account's dotfiles are never run (see broker.ts).
   */
  readonly jobHome?: string;
  /** The in-allocation launcher a WORKER batch script calls. */
  readonly launcher?: string;
  /** How far back the token lookup searches accounting. */
  readonly accountingLookbackSeconds?: number;
  /** LOST needs absence from queue and accounting for at least this long... */
  readonly lostGraceMs?: number;
  /** ...and over at least this many consecutive successful observations. */
  readonly lostMinObservations?: number;
  /** sbatch calls in flight at once during one submit(). */
  readonly submitConcurrency?: number;
  /** Per stream, for runTask's output. */
  readonly taskMaxOutputBytes?: number;
  /** How long a SIGKILLed job's ending waits for accounting's memory figures (end-hints.ts). */
  readonly usageGraceMs?: number;
  /**
   * This daemon's identity (one per state dir, orphan-sweeper.ts), carried in every job's
   * comment as `TOKEN.OWNER`, so two daemons on one cluster never take each other's jobs
   * for orphans.
   */
  readonly ownerId?: string;
  /** What the orphan sweep last found, shown in diagnostics. */
  readonly orphanReport?: () => OrphanReport | null;
  /** Names this process's change feed (tests); by default random, so a restart expires cursors. */
  readonly feedInstance?: string;
}

export const DEFAULT_JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const DEFAULT_JOB_LANG = "C.UTF-8";
const DEFAULT_ACCOUNTING_LOOKBACK_SECONDS = 7 * 86_400;
const DEFAULT_LOST_GRACE_MS = 60_000;
const DEFAULT_LOST_MIN_OBSERVATIONS = 3;
const DEFAULT_USAGE_GRACE_MS = 30_000;
/** How long before its limit a job is warned (SIGURG) unless its profile says otherwise. */
export const DEFAULT_WARN_BEFORE_LIMIT_SECONDS = 300;

/** The profile's warning, never more than half the job's whole time. */
function warningSeconds(timeLimitSeconds: number, placement: SlurmPlacement): number | null {
  const wanted = placement.warnBeforeLimitSeconds ?? DEFAULT_WARN_BEFORE_LIMIT_SECONDS;
  if (wanted === 0) return null;
  return Math.max(1, Math.min(wanted, Math.floor(timeLimitSeconds / 2)));
}
/** The variable the launcher sets to each task's rank. */
export const RANK_ENV = "SLURM_PROCID";

/**
 * What each task of a multi-task BATCH sees of the launcher's environment, by name (the
 * sandbox's `env -i` drops everything else, the login environment included): the rank and
 * layout variables MPI launchers and scripts read, and PMI's wire-up (PMI-1/2: the
 * descriptor srun passes and its rank/size; PMIx: the server's address and namespace).
 * SLURM_CONF and the scheduler's own sockets are not here: a task talks to its PMI
 * server, never to the controller. docs/operations.md lists these for admins.
 */
export const TASK_ENV: readonly string[] = [
  "SLURM_JOB_ID",
  "SLURM_JOBID",
  "SLURM_STEP_ID",
  "SLURM_PROCID",
  "SLURM_LOCALID",
  "SLURM_NODEID",
  "SLURM_NTASKS",
  "SLURM_NPROCS",
  "SLURM_NNODES",
  "SLURM_JOB_NUM_NODES",
  "SLURM_JOB_NODELIST",
  "SLURM_NODELIST",
  "SLURM_STEP_NODELIST",
  "SLURM_STEP_NUM_NODES",
  "SLURM_STEP_NUM_TASKS",
  "SLURM_STEP_TASKS_PER_NODE",
  "SLURM_TASKS_PER_NODE",
  "SLURM_CPUS_PER_TASK",
  "SLURM_CPUS_ON_NODE",
  "SLURM_JOB_CPUS_PER_NODE",
  "SLURM_TOPOLOGY_ADDR",
  "SLURMD_NODENAME",
  "SLURM_MPI_TYPE",
  "PMI_FD",
  "PMI_RANK",
  "PMI_SIZE",
  "PMI_JOBID",
  "PMI_SPAWNED",
  "PMI_TIME",
  "PMIX_RANK",
  "PMIX_NAMESPACE",
  "PMIX_SERVER_URI2",
  "PMIX_SERVER_URI21",
  "PMIX_SERVER_URI3",
  "PMIX_SERVER_URI4",
  "PMIX_SERVER_URI41",
  "PMIX_SERVER_TMPDIR",
  "PMIX_SYSTEM_TMPDIR",
  "PMIX_SECURITY_MODE",
  "PMIX_GDS_MODULE",
  "PMIX_PTL_MODULE",
  "PMIX_BFROP_BUFFER_TYPE",
  "PMIX_HOSTNAME",
  "PMIX_VERSION",
];
const SCRIPT_NAME = "job.sh";
/** sacct's placeholder name for a job whose record has not received its real name yet. */
const ACCOUNTING_PLACEHOLDER_NAME = "allocation";

export type SlurmBackend = BackendWith<"tasks" | "changes" | "jobEnv">;

/**
 * A listing row's key: a single job's id, or its array's id and the element (or, for a row of
 * pending elements, the first of its range: ranges never overlap). Elements of one array share
 * the job id, and keyed by it alone they overwrote one another in the change feed.
 */
function listingKey(row: QueueRow): string {
  const task = row.arrayTask;
  if (task === undefined) return row.jobId;
  return task.kind === "Element"
    ? `${row.jobId}_${task.index}`
    : `${row.jobId}_p${task.indices[0] ?? ""}`;
}

type Lookup =
  | { readonly kind: "Found"; readonly jobId: string; readonly observation: AllocationObservation }
  | { readonly kind: "Absent" }
  | { readonly kind: "Unavailable"; readonly message: string };

interface Absence {
  readonly handle: string;
  readonly since: number;
  readonly count: number;
}

export function createSlurmBackend(options: SlurmBackendOptions): SlurmBackend {
  const { broker, placements, clock, log } = options;
  const jobPath = options.jobPath ?? DEFAULT_JOB_PATH;
  const jobHome = options.jobHome ?? userInfo().homedir;
  /** The documented base of every job's environment (README: "Jobs get a minimal environment"). */
  const baseJobEnv = { PATH: jobPath, HOME: jobHome, LANG: DEFAULT_JOB_LANG };
  const launcher = options.launcher ?? "srun";
  const lookbackSeconds = options.accountingLookbackSeconds ?? DEFAULT_ACCOUNTING_LOOKBACK_SECONDS;
  const lostGraceMs = options.lostGraceMs ?? DEFAULT_LOST_GRACE_MS;
  const lostMinObservations = options.lostMinObservations ?? DEFAULT_LOST_MIN_OBSERVATIONS;
  const submitConcurrency = Math.max(1, options.submitConcurrency ?? 8);
  const taskMaxOutputBytes = options.taskMaxOutputBytes ?? 1024 * 1024;
  const usageGraceMs = options.usageGraceMs ?? DEFAULT_USAGE_GRACE_MS;

  /** Per allocation: since when, and for how many observations, it was seen nowhere. */
  const absences = new Map<string, Absence>();
  let health: { healthy: boolean; message: string } = { healthy: true, message: "no calls yet" };

  function noteFailure(error: SlurmCommandError): void {
    // A refused sbatch/scancel/srun is an answer about one job. A refused listing is not: a
    // squeue or sacct that exits nonzero (unparsable slurm.conf, no such user) leaves every
    // phase unread, and diagnostics saying "healthy" then hide why nothing moves.
    if (error.kind === "refused" && error.command !== "squeue" && error.command !== "sacct") {
      return;
    }
    health = { healthy: false, message: error.message };
    log.warn("scheduler call failed", {
      command: error.command,
      kind: error.kind,
      error: error.message,
    });
  }
  function noteSuccess(command: string): void {
    if (!health.healthy) log.info("scheduler answers again", { command });
    health = { healthy: true, message: `last ${command} answered` };
  }

  // -------------------------------------------------------------------------------------
  // Reading rows
  // -------------------------------------------------------------------------------------

  function observationOf(
    source: "queue" | "accounting",
    jobId: string,
    row: {
      readonly state: string;
      readonly exit: QueueRow["exit"];
      readonly startedAt: number | null;
      readonly endedAt: number | null;
    },
    pendingReason: string,
  ): AllocationObservation {
    const mapping = mapJobState(row.state, row.exit);
    if (mapping.kind === "Indeterminate") {
      if (mapping.unrecognised) {
        log.warn("unrecognised job state: leaving the phase unchanged", {
          jobId,
          source,
          state: row.state.slice(0, 64),
        });
      }
      return { kind: "Indeterminate", message: mapping.message };
    }
    const started = mapping.phase !== "QUEUED";
    const ended = isTerminal(mapping.phase);
    let message = mapping.message;
    let reason = mapping.reason;
    if (mapping.phase === "QUEUED" && pendingReason !== "") {
      // Why it waits, in terms of what the user can do (HELD, LIMIT_REACHED, ...); a
      // requeued job keeps REQUEUED, which says more than the reason it waits again.
      reason ??= mapPendingReason(pendingReason);
      if (pendingReason !== "None") message = `waiting: ${pendingReason}`;
    }
    return {
      kind: "Observed",
      phase: mapping.phase,
      reason,
      message,
      exitCode: mapping.exitCode,
      startedAt: started ? row.startedAt : null,
      endedAt: ended ? row.endedAt : null,
      // squeue's EndTime of a started job is the controller's own deadline for it (start +
      // limit, moved by a suspend or an admin's new limit); of a pending one only a guess,
      // and accounting prints none until the end: only the first is reported.
      ...(source === "queue" && started && !ended ? { deadlineAt: row.endedAt } : {}),
    };
  }

  const fromQueue = (row: QueueRow) => observationOf("queue", row.jobId, row, row.reason);
  const fromAccounting = (row: AccountingRow) => observationOf("accounting", row.jobId, row, "");

  // One element's row says nothing of the array's phase (element 0 COMPLETED while 999
  // wait): a token found on an array gives its handle only; the next observe reads it all.
  const arrayFound = (jobId: string): AllocationObservation => ({
    kind: "Indeterminate",
    message: `job array ${jobId} found; its elements are read on the next observation`,
  });
  const foundObservation = (row: QueueRow) =>
    row.arrayTask === undefined ? fromQueue(row) : arrayFound(row.jobId);

  const carries = (row: { readonly name: string; readonly comment: string }, token: string) =>
    row.name === token || row.comment === token || row.comment.startsWith(`${token}.`);

  /** Several jobs under one token would be an INV-8 breach: say so, and prefer the newest. */
  function pick<R extends { readonly jobId: string }>(token: string, rows: readonly R[]): R | null {
    if (rows.length === 0) return null;
    const ids = new Set(rows.map((r) => r.jobId));
    if (ids.size > 1) {
      log.error("several jobs carry one submission token", { token, jobIds: [...ids] });
    }
    return rows.reduce((a, b) => (BigInt(b.jobId) > BigInt(a.jobId) ? b : a));
  }

  // -------------------------------------------------------------------------------------
  // Token lookup: one squeue, then one sacct for the tokens the controller does not know.
  //
  // Both listings are filtered by our job names, so every row is one of ours and no other
  // job's free-text name can break the parse; a row then matches on JobName OR Comment.
  // squeue shows the comment whatever the accounting flags; sacct keeps it only with
  // job_comment and only once the job ended, which is why JobName is what the accounting
  // half stands on. squeue covers every state for MinJobAge after a job ends, which closes
  // the window in which accounting has not yet caught up with a job that just finished.
  // -------------------------------------------------------------------------------------

  async function lookupTokens(
    tokens: readonly SubmissionToken[],
  ): Promise<Map<SubmissionToken, Lookup>> {
    const out = new Map<SubmissionToken, Lookup>();
    const unique = [...new Set(tokens)];
    if (unique.length === 0) return out;
    const queue = await broker.listQueue(unique);
    if (queue.kind === "Failed") {
      noteFailure(queue.error);
      for (const t of unique) out.set(t, { kind: "Unavailable", message: queue.error.message });
      return out;
    }
    noteSuccess("squeue");
    const remaining: SubmissionToken[] = [];
    for (const token of unique) {
      const row = pick(
        token,
        queue.value.filter((r) => carries(r, token)),
      );
      if (row === null) remaining.push(token);
      else out.set(token, { kind: "Found", jobId: row.jobId, observation: foundObservation(row) });
    }
    if (remaining.length === 0) return out;
    const accounting = await broker.listAccounting({
      kind: "ByNames",
      names: remaining,
      lookbackSeconds,
    });
    if (accounting.kind === "Failed") {
      noteFailure(accounting.error);
      for (const t of remaining) {
        out.set(t, { kind: "Unavailable", message: accounting.error.message });
      }
      return out;
    }
    noteSuccess("sacct");
    for (const token of remaining) {
      const row = pick(
        token,
        accounting.value.filter((r) => carries(r, token)),
      );
      out.set(
        token,
        row === null
          ? { kind: "Absent" }
          : {
              kind: "Found",
              jobId: row.jobId,
              observation:
                row.arrayTask === undefined ? fromAccounting(row) : arrayFound(row.jobId),
            },
      );
    }
    return out;
  }

  // -------------------------------------------------------------------------------------
  // Submission
  // -------------------------------------------------------------------------------------

  type Prepared =
    | { readonly kind: "Ready"; readonly spec: BatchSpec }
    | { readonly kind: "Rejected"; readonly message: string; readonly byRequest?: true }
    | { readonly kind: "Unknown"; readonly message: string };

  function prepare(request: SubmitRequest): Prepared {
    const placement = placements.placement(request.profile);
    if (placement === null) {
      return { kind: "Rejected", message: `no such profile: ${JSON.stringify(request.profile)}` };
    }
    const launch = request.launch;
    let body: BatchBody;
    let nodes: number;
    switch (launch.kind) {
      case "COMMAND":
        body =
          launch.tasks === undefined
            ? { kind: "COMMAND", command: launch.command }
            : {
                kind: "TASKS",
                launcher,
                count: launch.tasks.count,
                perNode: launch.tasks.perNode,
                mpi: placement.mpi ?? null,
                owner: launch.tasks.owner ?? null,
                command: launch.command,
              };
        nodes = placement.nodes;
        break;
      case "WORKER":
        body = {
          kind: "WORKER",
          launcher,
          ranks: launch.ranks,
          workerCommand: launch.workerCommand,
          rankEnv: RANK_ENV,
        };
        nodes = launch.ranks;
        break;
      default: {
        const never: never = launch;
        throw new Error(`unhandled launch ${JSON.stringify(never)}`);
      }
    }
    const rendered = renderBatchScript(body, { array: request.array !== undefined });
    if (rendered.kind === "Invalid") {
      return { kind: "Rejected", message: rendered.message, byRequest: true };
    }
    // The profile's limit is a ceiling ("a workload may ask for less"), never raised here.
    const timeLimitSeconds =
      request.timeLimitSeconds === null
        ? placement.timeLimitSeconds
        : placement.timeLimitSeconds === null
          ? request.timeLimitSeconds
          : Math.min(request.timeLimitSeconds, placement.timeLimitSeconds);
    const scriptPath = join(request.allocationDir, SCRIPT_NAME);
    try {
      writeBatchScript(request, scriptPath, rendered.script);
    } catch (error) {
      // Nothing was submitted, but a full disk is not the workload's fault: Unknown sends the
      // caller through findByToken (Absent) and back here, rather than failing the workload.
      return { kind: "Unknown", message: `could not write the batch script: ${String(error)}` };
    }
    return {
      kind: "Ready",
      spec: {
        jobName: request.token,
        comment: jobComment(request.token, options.ownerId),
        scriptPath,
        workDir: request.workspaceDir,
        stdoutPath: allocationLogPath(request.allocationDir, "stdout"),
        stderrPath: allocationLogPath(request.allocationDir, "stderr"),
        partition: placement.partition,
        qos: placement.qos,
        account: placement.account,
        nodes,
        ...(launch.kind === "COMMAND" && launch.tasks !== undefined
          ? { tasks: { count: launch.tasks.count, perNode: launch.tasks.perNode } }
          : {}),
        cpusPerTask: placement.cpus,
        gpusPerNode: placement.gpus,
        memoryMb: placement.memoryMb,
        // The scheduler counts whole minutes: round up, never cut the user's time short.
        timeLimitMinutes:
          timeLimitSeconds === null ? null : Math.max(1, Math.ceil(timeLimitSeconds / 60)),
        warnBeforeLimitSeconds:
          timeLimitSeconds === null ? null : warningSeconds(timeLimitSeconds, placement),
        // The job's whole environment. The launch env may override PATH; the broker refuses
        // credential-shaped names and values that would change the meaning of --export.
        env: { ...baseJobEnv, ...launch.env },
        array: request.array ?? null,
        ...(request.submitAs === undefined ? {} : { submitAs: request.submitAs }),
      },
    };
  }

  /**
   * The attempt's preparer made both directories; they are made here only when missing (a
   * caller that prepared nothing), so the usual path is one write: every system call on
   * the way from POST to the controller's queue counts.
   */
  function writeBatchScript(request: SubmitRequest, scriptPath: string, script: string): void {
    // Never through a link: an owner's job has its allocation directory given to the owner's
    // account (its logs are opened there as that account), and a link the owner planted as
    // the script's name would have had root write wherever it points.
    try {
      writeNoFollow(scriptPath, script);
      return;
    } catch (error) {
      if ((error as { readonly code?: unknown }).code !== "ENOENT") throw error;
    }
    mkdirSync(request.allocationDir, { recursive: true, mode: 0o700 });
    mkdirSync(request.workspaceDir, { recursive: true, mode: 0o700 });
    writeNoFollow(scriptPath, script);
  }

  async function submitOne(request: SubmitRequest): Promise<SubmitResult> {
    const token = request.token;
    const prepared = prepare(request);
    switch (prepared.kind) {
      case "Rejected":
        return {
          kind: "Rejected",
          token,
          message: prepared.message,
          ...(prepared.byRequest ? { byRequest: true as const } : {}),
        };
      case "Unknown":
        return { kind: "Unknown", token, message: prepared.message };
      case "Ready":
        break;
      default: {
        const never: never = prepared;
        throw new Error(`unhandled preparation ${JSON.stringify(never)}`);
      }
    }
    const result = await broker.submitBatch(prepared.spec);
    if (result.kind === "Answered") {
      noteSuccess("sbatch");
      log.info("submitted", { token, jobId: result.value, allocationId: request.allocationId });
      return { kind: "Created", token, handle: externalHandle(result.value) };
    }
    const error = result.error;
    noteFailure(error);
    switch (error.kind) {
      case "refused":
        // No exit code: refused by the broker's validation before sbatch ran (this request's
        // arguments), not by the scheduler.
        return {
          kind: "Rejected",
          token,
          message: error.message,
          ...(error.exitCode === null ? { byRequest: true as const } : {}),
        };
      case "timed_out":
      case "unreachable":
      case "malformed":
        // The job may exist: the answer, not the submission, may be what was lost.
        return { kind: "Unknown", token, message: error.message };
      default: {
        const never: never = error.kind;
        throw new Error(`unhandled error kind ${String(never)}`);
      }
    }
  }

  async function inPool<T, R>(items: readonly T[], limit: number, f: (t: T) => Promise<R>) {
    const results: R[] = new Array(items.length);
    let next = 0;
    const worker = async () => {
      for (;;) {
        const i = next++;
        if (i >= items.length) return;
        results[i] = await f(items[i] as T);
      }
    };
    await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
    return results;
  }

  // -------------------------------------------------------------------------------------
  // Observation
  // -------------------------------------------------------------------------------------

  /**
   * One more successful observation without the job. LOST only after both the count and the
   * time say so; until then Indeterminate, which changes nothing.
   */
  function absent(target: ObservationTarget, why: string): AllocationObservation {
    const now = clock.now();
    const previous = absences.get(target.allocationId);
    const entry: Absence =
      previous === undefined || previous.handle !== target.handle
        ? { handle: target.handle, since: now, count: 1 }
        : { ...previous, count: previous.count + 1 };
    absences.set(target.allocationId, entry);
    const forMs = now - entry.since;
    if (entry.count >= lostMinObservations && forMs >= lostGraceMs) {
      log.warn("job is in neither the queue nor accounting: LOST", {
        allocationId: target.allocationId,
        jobId: target.handle,
        observations: entry.count,
        forMs,
      });
      return {
        kind: "Observed",
        phase: "LOST",
        reason: "NOT_FOUND_BY_BACKEND",
        message: `job ${target.handle} ${why} for ${Math.round(forMs / 1000)} s over ${entry.count} observations`,
        exitCode: null,
        startedAt: null,
        endedAt: null,
      };
    }
    return {
      kind: "Indeterminate",
      message: `job ${target.handle} ${why} (${entry.count} of ${lostMinObservations} observations, ${Math.round(forMs / 1000)} s of ${Math.round(lostGraceMs / 1000)} s)`,
    };
  }

  function accountingObservation(
    target: ObservationTarget,
    rows: readonly AccountingRow[],
  ): AllocationObservation {
    const sameId = rows.filter((r) => r.jobId === target.handle);
    const ours = pick(
      target.token,
      sameId.filter((r) => carries(r, target.token)),
    );
    if (ours === null) {
      if (sameId.some((r) => r.name === ACCOUNTING_PLACEHOLDER_NAME)) {
        // Accounting has the id but not yet its name: lag, not absence.
        return {
          kind: "Indeterminate",
          message: `accounting has job ${target.handle} without its name yet`,
        };
      }
      return absent(target, "is in neither the queue nor accounting");
    }
    const observation = fromAccounting(ours);
    if (observation.kind === "Observed" && !isTerminal(observation.phase)) {
      // The controller no longer knows the job, but accounting still says it lives: either
      // accounting lags, or the controller lost it. Only time tells which.
      return absent(
        target,
        `is not in the queue while accounting says ${normaliseState(ours.state)}`,
      );
    }
    absences.delete(target.allocationId);
    return observation;
  }

  /**
   * Failures that a person acts on by numbers (memory, time) get them: one sacct for every
   * such ending of this observation. Without an answer the ending stands as observed; a
   * SIGKILL without memory figures yet waits (Indeterminate) for at most the grace.
   */
  async function explainEndings(
    observations: Map<string, AllocationObservation>,
    targets: readonly ObservationTarget[],
  ): Promise<ObserveResult> {
    const wanting = targets.filter((t) => {
      const o = observations.get(t.allocationId);
      return o !== undefined && needsUsage(o);
    });
    if (wanting.length === 0) return { kind: "Observed", observations };
    const usage = await broker.listUsage([...new Set(wanting.map((t) => t.handle))]);
    if (usage.kind === "Failed") noteFailure(usage.error);
    const byJob = new Map(usage.kind === "Answered" ? usage.value.map((u) => [u.jobId, u]) : []);
    for (const t of wanting) {
      const o = observations.get(t.allocationId);
      if (o === undefined || !needsUsage(o)) continue;
      const u = byJob.get(t.handle);
      if (usagePending(o, u, clock.now(), usageGraceMs)) {
        observations.set(t.allocationId, {
          kind: "Indeterminate",
          message: `job ${t.handle} was killed; waiting for accounting to say whether memory ran out`,
        });
      } else {
        observations.set(t.allocationId, explainEnding(o, u, placements.profiles()));
      }
    }
    return { kind: "Observed", observations };
  }

  /**
   * The targets' observations from one listing of the controller (`queueRows`, by job id),
   * with one sacct for those that left it: what `observe` and `observeChanges` share, so
   * the full and the incremental path decide alike (INV-5: LOST only on evidence).
   */
  async function observeListed(
    targets: readonly ObservationTarget[],
    queueRows: ReadonlyMap<string, QueueRow>,
    /** An array's element rows in the same listing, by the array's job id. */
    elementRowsOf: (handle: string) => readonly QueueRow[],
  ): Promise<ObserveResult> {
    const observations = new Map<string, AllocationObservation>();
    const singles = targets.filter((t) => t.arraySize === undefined);
    const gone: ObservationTarget[] = [];
    for (const target of singles) {
      const row = queueRows.get(target.handle);
      if (row !== undefined && carries(row, target.token)) {
        absences.delete(target.allocationId);
        observations.set(target.allocationId, fromQueue(row));
      } else {
        gone.push(target);
      }
    }
    const arrays = readArrays(targets, elementRowsOf);
    if (gone.length === 0 && arrays.incomplete.length === 0) {
      finishArrays(arrays, null, observations);
      return explainEndings(observations, singles);
    }

    const accounting = await broker.listAccounting({
      kind: "ByJobIds",
      jobIds: [...new Set([...gone, ...arrays.incomplete].map((t) => t.handle))],
    });
    if (accounting.kind === "Failed") {
      noteFailure(accounting.error);
      // The controller answered, accounting did not: no evidence either way for these.
      for (const target of gone) {
        observations.set(target.allocationId, {
          kind: "Indeterminate",
          message: `not in the queue, and accounting did not answer: ${accounting.error.message}`,
        });
      }
      finishArrays(arrays, { failed: accounting.error.message }, observations);
      return explainEndings(observations, singles);
    }
    noteSuccess("sacct");
    for (const target of gone) {
      observations.set(target.allocationId, accountingObservation(target, accounting.value));
    }
    finishArrays(arrays, { rows: accounting.value }, observations);
    return explainEndings(observations, singles);
  }

  // -------------------------------------------------------------------------------------
  // Changes since a cursor: the same one squeue per tick, diffed against the last parse
  // -------------------------------------------------------------------------------------

  const feed = createChangeFeed(options.feedInstance ?? crypto.randomUUID());
  /** Lines of the last listing the feed read, so an unchanged line is not parsed again. */
  const memo = createSqueueMemo();
  /** The last listing the feed read, by job id. */
  const listed = new Map<string, QueueRow>();

  let names: { readonly membership: number; readonly list: readonly string[] } | null = null;
  /**
   * The job names to list, rebuilt only when the watch set's membership changed: the same
   * array (so the broker validates it once) for as long as the same jobs are watched.
   */
  function namesOf(
    membership: number,
    watched: ReadonlyMap<string, { readonly target: ObservationTarget }>,
  ): readonly string[] {
    if (names?.membership === membership) return names.list;
    const tokens = new Set<string>();
    for (const { target } of watched.values()) tokens.add(target.token);
    names = { membership, list: Object.freeze([...tokens]) };
    return names.list;
  }

  /** The rows `listed` was last made from, in the listing's order. */
  let listedRows: readonly QueueRow[] = [];
  /** The element rows of each job array in `listed`, by the array's job id. */
  const listedElements = new Map<string, Map<string, QueueRow>>();

  function keep(key: string, row: QueueRow): void {
    listed.set(key, row);
    if (row.arrayTask === undefined) return;
    const rows = listedElements.get(row.jobId) ?? new Map<string, QueueRow>();
    listedElements.set(row.jobId, rows);
    rows.set(key, row);
  }

  function forget(key: string, row: QueueRow): void {
    listed.delete(key);
    const rows = listedElements.get(row.jobId);
    if (rows === undefined) return;
    rows.delete(key);
    if (rows.size === 0) listedElements.delete(row.jobId);
  }

  /**
   * Takes a new listing in: `listed` becomes it, and the job ids whose row is new, changed
   * or gone are returned (an array's id when one of its element rows moved). A row printed as
   * last time is the memo's same object, so the steady case costs one comparison per row (the
   * same place as last time) and no parse.
   */
  function relist(rows: readonly QueueRow[]): string[] {
    const previous = listedRows;
    listedRows = rows;
    if (rows === previous) return [];
    const moved: string[] = [];
    let present = 0;
    const changed: QueueRow[] = [];
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i] as QueueRow;
      if (previous[i] === row) {
        present += 1;
        continue;
      }
      const old = listed.get(listingKey(row));
      if (old !== undefined) present += 1;
      if (old !== row) changed.push(row);
    }
    if (present < listed.size) {
      const now = new Set(rows.map(listingKey));
      for (const [key, row] of listed) {
        if (now.has(key)) continue;
        forget(key, row);
        moved.push(row.jobId);
      }
    }
    for (const row of changed) {
      keep(listingKey(row), row);
      moved.push(row.jobId);
    }
    return moved;
  }

  async function observeChanges(
    cursor: ObservationCursor | null,
    targets: readonly ObservationTarget[],
  ): Promise<ObserveChangesResult> {
    const opening = feed.open(cursor, targets);
    if (opening.kind === "CursorExpired") return opening;
    const { watched } = opening;
    for (const id of absences.keys()) if (!watched.has(id)) absences.delete(id);
    if (watched.size === 0) return feed.answer(opening, targets, new Map());
    const queue = await broker.listQueue(namesOf(opening.membership, watched), memo);
    if (queue.kind === "Failed") {
      noteFailure(queue.error);
      return { kind: "Unavailable", message: queue.error.message };
    }
    noteSuccess("squeue");
    // Read again: the targets, every watched job whose row moved, and every watched job
    // without a steady answer yet (one waiting on accounting counts its absences each time,
    // as a full observe would).
    const reread = new Map<string, ObservationTarget>();
    for (const t of targets) reread.set(t.allocationId, t);
    for (const jobId of relist(queue.value)) {
      const id = feed.byHandle(jobId);
      const entry = id === undefined ? undefined : watched.get(id);
      if (entry !== undefined) reread.set(entry.target.allocationId, entry.target);
    }
    for (const [id, entry] of watched) {
      if (entry.last === undefined || entry.last.kind === "Indeterminate") {
        reread.set(id, entry.target);
      }
    }
    const result = await observeListed([...reread.values()], listed, (handle) => [
      ...(listedElements.get(handle)?.values() ?? []),
    ]);
    if (result.kind === "Unavailable") return result;
    return feed.answer(opening, targets, result.observations);
  }

  // -------------------------------------------------------------------------------------
  // Job arrays: the same one squeue per tick, and one sacct shared with single jobs for the
  // elements the controller has already forgotten (MinJobAge after each element ended).
  // -------------------------------------------------------------------------------------

  interface ArrayReads {
    readonly elements: ReadonlyMap<ObservationTarget, Map<number, ArrayElementState>>;
    /** Arrays with elements the queue did not show: accounting is asked about them. */
    readonly incomplete: readonly ObservationTarget[];
  }

  function readArrays(
    targets: readonly ObservationTarget[],
    elementRowsOf: (handle: string) => readonly QueueRow[],
  ) {
    const elements = new Map<ObservationTarget, Map<number, ArrayElementState>>();
    const incomplete: ObservationTarget[] = [];
    for (const target of targets) {
      const size = target.arraySize;
      if (size === undefined) continue;
      const found = new Map<number, ArrayElementState>();
      const ours = elementRowsOf(target.handle).filter((r) => carries(r, target.token));
      collectElements(ours, size, fromQueue, found);
      elements.set(target, found);
      if (found.size < size) incomplete.push(target);
    }
    return { elements, incomplete } satisfies ArrayReads;
  }

  function finishArrays(
    reads: ArrayReads,
    accounting: { readonly rows: readonly AccountingRow[] } | { readonly failed: string } | null,
    observations: Map<string, AllocationObservation>,
  ): void {
    for (const [target, found] of reads.elements) {
      const size = target.arraySize ?? 0;
      if (accounting !== null && "rows" in accounting) {
        const ours = accounting.rows.filter(
          (r) => r.jobId === target.handle && carries(r, target.token),
        );
        collectElements(ours, size, fromAccounting, found);
      }
      if (found.size > 0) {
        absences.delete(target.allocationId);
        observations.set(target.allocationId, arrayObservation(size, found));
      } else if (accounting !== null && "failed" in accounting) {
        observations.set(target.allocationId, {
          kind: "Indeterminate",
          message: `array not in the queue, and accounting did not answer: ${accounting.failed}`,
        });
      } else {
        observations.set(
          target.allocationId,
          absent(target, "is in neither the queue nor accounting"),
        );
      }
    }
  }

  // -------------------------------------------------------------------------------------
  // The port
  // -------------------------------------------------------------------------------------

  return {
    name: "slurm",

    profiles: () => placements.profiles(),

    async submit(requests) {
      const out = new Map<SubmissionToken, SubmitResult>();
      const unique = new Map<SubmissionToken, SubmitRequest>();
      for (const r of requests) if (!unique.has(r.token)) unique.set(r.token, r);
      if (unique.size === 0) return out;
      // A fresh token was never handed to the scheduler: asking for it could only say Absent.
      const fresh = [...unique.values()].filter((r) => r.freshToken === true);
      const asked = [...unique.keys()].filter((t) => unique.get(t)?.freshToken !== true);
      const lookup = await lookupTokens(asked);
      for (const r of fresh) lookup.set(r.token, { kind: "Absent" });
      const toSubmit: SubmitRequest[] = [];
      for (const [token, request] of unique) {
        const found = lookup.get(token) ?? { kind: "Unavailable", message: "not looked up" };
        switch (found.kind) {
          case "Found":
            out.set(token, { kind: "Existing", token, handle: externalHandle(found.jobId) });
            break;
          case "Unavailable":
            out.set(token, {
              kind: "Unknown",
              token,
              message: `could not tell whether this submission already exists: ${found.message}`,
            });
            break;
          case "Absent":
            toSubmit.push(request);
            break;
          default: {
            const never: never = found;
            throw new Error(`unhandled lookup ${JSON.stringify(never)}`);
          }
        }
      }
      const results = await inPool(toSubmit, submitConcurrency, submitOne);
      for (const result of results) out.set(result.token, result);
      return out;
    },

    async observe(targets): Promise<ObserveResult> {
      const wanted = new Set(targets.map((t) => t.allocationId));
      for (const id of absences.keys()) if (!wanted.has(id)) absences.delete(id);
      if (targets.length === 0) return { kind: "Observed", observations: new Map() };

      const queue = await broker.listQueue([...new Set(targets.map((t) => t.token))]);
      if (queue.kind === "Failed") {
        noteFailure(queue.error);
        return { kind: "Unavailable", message: queue.error.message };
      }
      noteSuccess("squeue");
      // A job array's rows are read by readArrays only: a single job's target never meets one.
      const byId = new Map<string, QueueRow>();
      const elementRows = new Map<string, QueueRow[]>();
      for (const row of queue.value) {
        if (row.arrayTask === undefined) {
          byId.set(row.jobId, row);
          continue;
        }
        const rows = elementRows.get(row.jobId);
        if (rows === undefined) elementRows.set(row.jobId, [row]);
        else rows.push(row);
      }
      return observeListed(targets, byId, (handle) => elementRows.get(handle) ?? []);
    },

    async cancel(targets) {
      const out = new Map<string, CancelResult>();
      if (targets.length === 0) return out;
      const result = await broker.cancelJobs([...new Set(targets.map((t) => t.handle))]);
      if (result.kind === "Failed") noteFailure(result.error);
      for (const target of targets) {
        out.set(
          target.allocationId,
          result.kind === "Answered"
            ? { kind: "Requested" }
            : { kind: "Unavailable", message: result.error.message },
        );
      }
      return out;
    },

    async findByToken(tokens) {
      const lookup = await lookupTokens(tokens);
      const out = new Map<SubmissionToken, FindResult>();
      for (const token of tokens) {
        const found = lookup.get(token) ?? { kind: "Unavailable", message: "not looked up" };
        switch (found.kind) {
          case "Found":
            out.set(token, {
              kind: "Found",
              handle: externalHandle(found.jobId),
              observation: found.observation,
            });
            break;
          case "Absent":
            out.set(token, { kind: "Absent" });
            break;
          case "Unavailable":
            out.set(token, { kind: "Unavailable", message: found.message });
            break;
          default: {
            const never: never = found;
            throw new Error(`unhandled lookup ${JSON.stringify(never)}`);
          }
        }
      }
      return out;
    },

    async diagnostics(): Promise<BackendDiagnostics> {
      return {
        backend: "slurm",
        healthy: health.healthy,
        message: health.message,
        calls: broker.callCounts(),
        ...(options.orphanReport === undefined ? {} : { orphans: options.orphanReport() }),
      };
    },

    capabilities: {
      ...NO_CAPABILITIES,
      tasks: {
        async runTask(target, command, { timeoutMs, submitAs }): Promise<TaskResult> {
          const queue = await broker.listQueue([target.token]);
          if (queue.kind === "Failed") {
            noteFailure(queue.error);
            return { kind: "Unavailable", message: queue.error.message };
          }
          noteSuccess("squeue");
          const row = queue.value.find(
            (r) => r.jobId === target.handle && carries(r, target.token),
          );
          if (row === undefined) {
            return { kind: "Refused", message: "no live allocation: the job is not in the queue" };
          }
          const state = normaliseState(row.state);
          if (state !== "RUNNING") {
            return { kind: "Refused", message: `no live allocation: the job is ${state}` };
          }
          const result = await broker.runStep({
            jobId: row.jobId,
            command,
            // The step sees the same OPENAI4S_DEADLINE as its job: squeue's EndTime of a running
            // job, the controller's own deadline (what the batch script reads, and what
            // observations report as deadlineAt). srun run from here has no job shell to copy it.
            env:
              row.endedAt === null
                ? baseJobEnv
                : { ...baseJobEnv, [DEADLINE_ENV]: deadlineEnvValue(row.endedAt) },
            workDir: row.workDir.startsWith("/") ? row.workDir : null,
            timeoutMs,
            maxOutputBytes: taskMaxOutputBytes,
            // The scheduler's own backstop, should this daemon die before its timer fires.
            timeLimitMinutes: Math.max(1, Math.ceil(timeoutMs / 60_000) + 1),
            ...(submitAs === undefined ? {} : { submitAs }),
          });
          if (result.kind === "Answered") {
            const { exitCode, stdout, stderr } = result.value;
            return { kind: "Completed", exitCode, stdout, stderr };
          }
          const error = result.error;
          switch (error.kind) {
            case "refused":
              return { kind: "Refused", message: error.message };
            case "timed_out":
              return {
                kind: "Unavailable",
                message: `the task did not finish within ${timeoutMs} ms and was stopped`,
              };
            case "unreachable":
            case "malformed":
              noteFailure(error);
              return { kind: "Unavailable", message: error.message };
            default: {
              const never: never = error.kind;
              throw new Error(`unhandled error kind ${String(never)}`);
            }
          }
        },
      },
      changes: { observeChanges },
      jobEnv: { jobEnvRefusals },
    },
  };
}

/** `text` into `path` (created 0700, or truncated), refusing a link there (ELOOP). */
function writeNoFollow(path: string, text: string): void {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
  const fd = openSync(path, flags, 0o700);
  try {
    writeFileSync(fd, text);
  } finally {
    closeSync(fd);
  }
}
