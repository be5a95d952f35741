/**
 * Requests and their argv: one builder per scheduler command, each validating every value
 * before an argv exists (broker-validation.ts). The broker (broker.ts) runs them.
 */
import {
  EXPORT_OPTION,
  firstInvalid,
  invalid,
  VALID,
  validateCount,
  validateEnv,
  validateJobLabel,
  validatePath,
  validateSchedulerName,
} from "./broker-validation.ts";
import { isJobId, LIVE_JOB_FIELDS, SACCT_FIELDS } from "./parse.ts";
import { SQUEUE_FIELDS } from "./parse-squeue.ts";
import { USAGE_FIELDS } from "./parse-usage.ts";
/** One batch job. Everything here is validated before an argv exists. */
export interface BatchSpec {
  readonly jobName: string;
  readonly comment: string;
  /** The batch script file (written by the backend, see batch-script.ts). */
  readonly scriptPath: string;
  readonly workDir: string;
  readonly stdoutPath: string;
  readonly stderrPath: string;
  readonly partition: string | null;
  readonly qos: string | null;
  readonly account: string | null;
  readonly nodes: number;
  /**
   * Tasks the allocation holds (a multi-task BATCH, launched by srun from the script);
   * absent: one per node, as sessions and single-task BATCH always had.
   */
  readonly tasks?: { readonly count: number; readonly perNode: number | null };
  readonly cpusPerTask: number;
  readonly gpusPerNode: number;
  readonly memoryMb: number | null;
  /** Whole minutes: the scheduler's unit. */
  readonly timeLimitMinutes: number | null;
  /**
   * Seconds before the time limit at which the job's main process gets SIGURG (`--signal`),
   * a warning it may catch to save its work; ignored by default, so a program that does not
   * listen is not ended early. Null: no warning.
   */
  readonly warnBeforeLimitSeconds?: number | null;
  /** The job's entire environment (plus the scheduler's own SLURM_* variables). */
  readonly env: Readonly<Record<string, string>>;
  /**
   * A job array: elements 0..size-1 from this one submission (`--array=0-(size-1)%max`),
   * each writing its own logs: `<stdoutPath>.<index>` and `<stderrPath>.<index>`.
   * Absent or null: one job, exactly as before arrays existed.
   */
  readonly array?: { readonly size: number; readonly maxConcurrent: number | null } | null;
  /**
   * Submit for this account (`--uid`/`--gid`, which only root may pass): the job runs as it
   * and accounting, fair share and limits charge it. Absent: the submitting account.
   */
  readonly submitAs?: { readonly uid: number; readonly gid: number } | null;
}

/** Slurm's own ceiling for MaxArraySize; a site's limit is checked before this, at admission. */
const SLURM_MAX_ARRAY_SIZE = 4_000_001;

function arrayChecks(array: BatchSpec["array"]) {
  if (array === undefined || array === null) return [];
  return [
    validateCount("array size", array.size, 1, SLURM_MAX_ARRAY_SIZE),
    array.maxConcurrent === null
      ? VALID
      : validateCount("array maxConcurrent", array.maxConcurrent, 1, array.size),
  ];
}

function perElement(array: BatchSpec["array"]): string {
  return array === undefined || array === null ? "" : ".%a";
}

function arrayOption(array: BatchSpec["array"]): string[] {
  if (array === undefined || array === null) return [];
  const cap = array.maxConcurrent === null ? "" : `%${array.maxConcurrent}`;
  return [`--array=0-${array.size - 1}${cap}`];
}

export type ArgvResult =
  | { readonly kind: "Valid"; readonly argv: readonly string[] }
  | { readonly kind: "Invalid"; readonly message: string };

function taskOptions(tasks: BatchSpec["tasks"]): readonly string[] {
  if (tasks === undefined) return ["--ntasks-per-node=1"];
  return [
    `--ntasks=${tasks.count}`,
    ...(tasks.perNode === null ? [] : [`--ntasks-per-node=${tasks.perNode}`]),
  ];
}

/** Never root's uid or group, whatever resolved them: the last wall before the scheduler. */
function submitAsChecks(submitAs: BatchSpec["submitAs"]) {
  if (submitAs === undefined || submitAs === null) return [];
  return [
    validateCount("uid to submit as", submitAs.uid, 1, 0xfffffffe),
    validateCount("gid to submit as", submitAs.gid, 1, 0xfffffffe),
  ];
}

export function sbatchArgv(spec: BatchSpec): ArgvResult {
  const check = firstInvalid([
    validateJobLabel("job name", spec.jobName),
    validateJobLabel("comment", spec.comment),
    validatePath("script", spec.scriptPath),
    validatePath("working directory", spec.workDir),
    validatePath("stdout log", spec.stdoutPath),
    validatePath("stderr log", spec.stderrPath),
    spec.partition === null ? VALID : validateSchedulerName("partition", spec.partition),
    spec.qos === null ? VALID : validateSchedulerName("qos", spec.qos),
    spec.account === null ? VALID : validateSchedulerName("account", spec.account),
    validateCount("nodes", spec.nodes, 1, 100_000),
    spec.tasks === undefined ? VALID : validateCount("tasks", spec.tasks.count, 1, 1_000_000),
    spec.tasks === undefined || spec.tasks.perNode === null
      ? VALID
      : validateCount("tasks per node", spec.tasks.perNode, 1, 1_000_000),
    validateCount("cpus", spec.cpusPerTask, 1, 1_000_000),
    validateCount("gpus", spec.gpusPerNode, 0, 1_000),
    spec.memoryMb === null ? VALID : validateCount("memory (MB)", spec.memoryMb, 1, 1 << 30),
    spec.timeLimitMinutes === null
      ? VALID
      : validateCount("time limit (minutes)", spec.timeLimitMinutes, 1, 100_000_000),
    validateEnv(spec.env),
    spec.warnBeforeLimitSeconds === undefined || spec.warnBeforeLimitSeconds === null
      ? VALID
      : validateCount("warning (s)", spec.warnBeforeLimitSeconds, 1, 65_535),
    ...arrayChecks(spec.array),
    ...submitAsChecks(spec.submitAs),
  ]);
  if (check.kind === "Invalid") return check;
  const warn =
    spec.timeLimitMinutes === null ||
    spec.warnBeforeLimitSeconds === undefined ||
    spec.warnBeforeLimitSeconds === null
      ? []
      : [`--signal=B:URG@${spec.warnBeforeLimitSeconds}`];
  return {
    kind: "Valid",
    argv: [
      "--parsable",
      `--job-name=${spec.jobName}`,
      `--comment=${spec.comment}`,
      `--chdir=${spec.workDir}`,
      // The paths were refused if they held a `%`; the only pattern sbatch expands is the
      // element index this builder adds itself, so an element's log goes where we chose.
      `--output=${spec.stdoutPath}${perElement(spec.array)}`,
      `--error=${spec.stderrPath}${perElement(spec.array)}`,
      ...(spec.partition === null ? [] : [`--partition=${spec.partition}`]),
      ...(spec.qos === null ? [] : [`--qos=${spec.qos}`]),
      ...(spec.account === null ? [] : [`--account=${spec.account}`]),
      `--nodes=${spec.nodes}`,
      ...taskOptions(spec.tasks),
      `--cpus-per-task=${spec.cpusPerTask}`,
      ...(spec.gpusPerNode > 0 ? [`--gres=gpu:${spec.gpusPerNode}`] : []),
      ...(spec.memoryMb === null ? [] : [`--mem=${spec.memoryMb}M`]),
      ...(spec.timeLimitMinutes === null ? [] : [`--time=${spec.timeLimitMinutes}`]),
      ...warn,
      ...arrayOption(spec.array),
      ...(spec.submitAs === undefined || spec.submitAs === null
        ? []
        : [`--uid=${spec.submitAs.uid}`, `--gid=${spec.submitAs.gid}`]),
      // One attempt is one epoch: a requeue would rerun the attempt under the same identity
      // (and a burned credential). A node failure ends the job; the reconciler decides.
      "--no-requeue",
      EXPORT_OPTION,
      spec.scriptPath,
    ],
  };
}

/**
 * Linux refuses to start a program with any one argument longer than MAX_ARG_STRLEN (32
 * pages: 128 KiB) with E2BIG. A list of names or ids joined into one option reached it at
 * about 4,200 of our job names, and squeue then failed on every tick. Lists are cut into
 * pieces well under it (listPieces), and the queue is listed by user instead (squeueArgv).
 */
export const LIST_ARGUMENT_BUDGET_BYTES = 64 * 1024;

/**
 * `items` in order, cut into pieces whose comma-joined length stays within `budgetBytes`
 * (an item longer than the budget alone is a piece of its own: the validators keep names
 * and ids far shorter). One piece for any list that fits: the usual case costs one call.
 */
export function listPieces(
  items: readonly string[],
  budgetBytes: number = LIST_ARGUMENT_BUDGET_BYTES,
): readonly (readonly string[])[] {
  const pieces: string[][] = [];
  let piece: string[] = [];
  let bytes = 0;
  for (const item of items) {
    // Each item counted with a comma: at most one byte too many per piece.
    const cost = Buffer.byteLength(item) + 1;
    if (piece.length > 0 && bytes + cost > budgetBytes) {
      pieces.push(piece);
      piece = [];
      bytes = 0;
    }
    piece.push(item);
    bytes += cost;
  }
  if (piece.length > 0) pieces.push(piece);
  return pieces;
}

/**
 * Every job of the service account (`uid`) in every state the controller still remembers;
 * the broker keeps the rows named `names` (parse.ts) and parses no other line. Not
 * `--name=`: the names of 10,000 live jobs do not fit in one argument (see above), and
 * squeue filters names in the client anyway, after loading every job of every user from
 * the controller, while one `--user` is answered by the controller from that user's jobs
 * alone. So one call per tick at any count, and no more work for the controller than before.
 */
export function squeueArgv(query: {
  /** null: every account's jobs (jobs submitted as their owners belong to many accounts). */
  readonly uid: number | null;
  readonly names: readonly string[];
}): ArgvResult {
  const { uid, names } = query;
  if (uid !== null && (!Number.isInteger(uid) || uid < 0)) {
    return { kind: "Invalid", message: `bad uid ${uid}` };
  }
  if (names.length === 0) return { kind: "Invalid", message: "no job names to list" };
  const check = firstInvalid(names.map((n) => validateJobLabel("job name", n)));
  if (check.kind === "Invalid") return check;
  const format = SQUEUE_FIELDS.map((f, i) => `${f}:0${i < SQUEUE_FIELDS.length - 1 ? "|" : ""}`);
  return {
    kind: "Valid",
    argv: [
      "--noheader",
      // Every state: a job that ended less than MinJobAge ago is still here, which is what
      // closes the gap while accounting has not caught up yet.
      "--states=all",
      ...(uid === null ? [] : [`--user=${uid}`]),
      `--Format=${format.join(",")}`,
    ],
  };
}

export type AccountingQuery =
  | { readonly kind: "ByJobIds"; readonly jobIds: readonly string[] }
  /**
   * By job name over a window: sacct's default window starts at midnight today, so a job
   * submitted yesterday would otherwise read as absent.
   */
  | {
      readonly kind: "ByNames";
      readonly names: readonly string[];
      readonly lookbackSeconds: number;
    };

export function sacctArgv(query: AccountingQuery): ArgvResult {
  const common = [
    "--noheader",
    "--parsable2",
    // Job rows only: a step's state ("123.batch CANCELLED") is not the job's state.
    "--allocations",
    `--format=${SACCT_FIELDS.join(",")}`,
  ];
  switch (query.kind) {
    case "ByJobIds": {
      if (query.jobIds.length === 0) return { kind: "Invalid", message: "no job ids to look up" };
      const bad = query.jobIds.find((id) => !isJobId(id));
      if (bad !== undefined)
        return { kind: "Invalid", message: `not a job id: ${JSON.stringify(bad)}` };
      // With --jobs the window defaults to all of history, which is what a lookup by id needs.
      return { kind: "Valid", argv: [...common, `--jobs=${query.jobIds.join(",")}`] };
    }
    case "ByNames": {
      if (query.names.length === 0) return { kind: "Invalid", message: "no job names to look up" };
      const check = firstInvalid([
        ...query.names.map((n) => validateJobLabel("job name", n)),
        validateCount("lookback (s)", query.lookbackSeconds, 1, 10 * 365 * 86_400),
      ]);
      if (check.kind === "Invalid") return check;
      return {
        kind: "Valid",
        argv: [
          ...common,
          `--starttime=now-${query.lookbackSeconds}`,
          "--endtime=now",
          `--name=${query.names.join(",")}`,
        ],
      };
    }
    default: {
      const never: never = query;
      throw new Error(`unhandled accounting query ${JSON.stringify(never)}`);
    }
  }
}

/**
 * Every job the controller holds that has not ended (squeue's default states), of the account
 * `uid` or (null) of every account: one call, whatever the count, for the orphan sweep.
 */
export function liveJobsArgv(uid: number | null): ArgvResult {
  if (uid !== null && (!Number.isInteger(uid) || uid < 0)) {
    return { kind: "Invalid", message: `bad uid ${uid}` };
  }
  const format = LIVE_JOB_FIELDS.map(
    (f, i) => `${f}:0${i < LIVE_JOB_FIELDS.length - 1 ? "|" : ""}`,
  );
  return {
    kind: "Valid",
    argv: [
      "--noheader",
      ...(uid === null ? [] : [`--user=${uid}`]),
      `--Format=${format.join(",")}`,
    ],
  };
}

/** The controller's running configuration (read-only: `show` never changes anything). */
export function siteConfigArgv(): ArgvResult {
  return { kind: "Valid", argv: ["show", "config"] };
}

/** What ended jobs asked for and used: job AND step rows (MaxRSS lives on the steps). */
export function usageArgv(jobIds: readonly string[]): ArgvResult {
  if (jobIds.length === 0) return { kind: "Invalid", message: "no job ids to look up" };
  const bad = jobIds.find((id) => !isJobId(id));
  if (bad !== undefined)
    return { kind: "Invalid", message: `not a job id: ${JSON.stringify(bad)}` };
  return {
    kind: "Valid",
    argv: [
      "--noheader",
      "--parsable2",
      `--format=${USAGE_FIELDS.join(",")}`,
      `--jobs=${jobIds.join(",")}`,
    ],
  };
}

export function scancelArgv(jobIds: readonly string[]): ArgvResult {
  if (jobIds.length === 0) return { kind: "Invalid", message: "no job ids to cancel" };
  const bad = jobIds.find((id) => !isJobId(id));
  if (bad !== undefined)
    return { kind: "Invalid", message: `not a job id: ${JSON.stringify(bad)}` };
  return { kind: "Valid", argv: [...jobIds] };
}

/** A step inside an allocation that already exists, under the same discipline as a job. */
export interface StepSpec {
  readonly jobId: string;
  readonly command: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly workDir: string | null;
  /** Our own deadline for the step; the group is terminated when it passes. */
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  /** The scheduler-side limit too, in whole minutes, should we die before our timer fires. */
  readonly timeLimitMinutes: number;
  /** Start it as this account (`--uid/--gid`): an owner's job takes steps from no one else. */
  readonly submitAs?: { readonly uid: number; readonly gid: number };
}

export function srunArgv(spec: StepSpec): ArgvResult {
  const program = spec.command[0];
  const check = firstInvalid([
    isJobId(spec.jobId) ? VALID : invalid(`not a job id: ${JSON.stringify(spec.jobId)}`),
    program === undefined || program === "" ? invalid("the command is empty") : VALID,
    spec.command.some((a) => a.includes("\0")) ? invalid("an argument contains NUL") : VALID,
    spec.workDir === null ? VALID : validatePath("working directory", spec.workDir),
    validateCount("time limit (minutes)", spec.timeLimitMinutes, 1, 100_000_000),
    validateEnv(spec.env),
    ...submitAsChecks(spec.submitAs),
  ]);
  if (check.kind === "Invalid") return check;
  return {
    kind: "Valid",
    argv: [
      `--jobid=${spec.jobId}`,
      ...(spec.submitAs === undefined
        ? []
        : [`--uid=${spec.submitAs.uid}`, `--gid=${spec.submitAs.gid}`]),
      // Share the allocation's resources with the steps already running in it (the batch
      // step, the workers) instead of waiting for them to end.
      "--overlap",
      "--nodes=1",
      "--ntasks=1",
      "--quiet",
      "--kill-on-bad-exit=1",
      `--time=${spec.timeLimitMinutes}`,
      ...(spec.workDir === null ? [] : [`--chdir=${spec.workDir}`]),
      EXPORT_OPTION,
      // Everything after this is the task's argv, whatever it looks like.
      "--",
      ...spec.command,
    ],
  };
}
