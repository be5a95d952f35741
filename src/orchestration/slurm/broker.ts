/**
 * The subprocess boundary: every sbatch, squeue, sacct, scancel and srun call goes through
 * here, with all the parsing (parse.ts), so INV-9 is checkable in one place.
 *
 * - argv arrays only, never a shell: a partition named `gpu; rm -rf /` is an argument. Values
 *   are attached to their option (`--partition=VALUE`), so no value can be read as an option.
 * - Job names and comments carry our identifiers into scheduler output and back out through
 *   a parser: they are restricted to a character class without separators.
 * - A credential-shaped environment variable name is refused outright: a job's environment is
 *   readable by anyone who can run `scontrol show job`. A secret travels as the path to a
 *   0600 file.
 * - A job's environment is exactly the one we document, and the service account's login
 *   environment never reaches it. Measured on 22.05: any `--export` other than the bare word
 *   ALL (a list, `ALL,<list>`, NONE) makes sbatch set SLURM_GET_USER_ENV, so slurmd runs the
 *   account's login shell and its dotfiles' variables (a pyenv PATH, a proxy) reach every job,
 *   and a job start costs a login shell more. So sbatch and srun run with `--export=ALL` and
 *   their own process environment IS the job's (jobEnvironment): the daemon's environment
 *   never reaches a job, and the scheduler's commands are found through a separate search
 *   path. Values are still held to what a `--export` list could carry (no comma, newline,
 *   NUL, quote, ALL/NONE/NIL): a site wrapper may turn the environment back into a list.
 * - Every call has a timeout that kills its whole process group, and output is drained under
 *   a byte cap. A long-lived step's output is drained under its own cap and timeout, not the
 *   control-command ones, so the transport does not kill the step it observes.
 * - SlurmCommandError tells `timed_out` from `unreachable` (including no such command on
 *   PATH) from a plain `refused`, and from `malformed` output. Swallowing "no scheduler on
 *   PATH" as "no such job" once declared every running job lost: nothing here ever turns a
 *   failure into an empty answer.
 */

import {
  createProgramRunner,
  type ProcessOutcome,
  type ProcessRequest,
  type ProgramRunner,
} from "../../process/runner.ts";
import { CREDENTIAL_ENV_NAME_PATTERN, hijackReasonOf } from "../env-policy.ts";
import {
  type AccountingRow,
  isJobId,
  type JobUsage,
  LIVE_JOB_FIELDS,
  type LiveJobRow,
  type Parsed,
  parseLiveJobs,
  parseSacct,
  parseSbatchParsable,
  parseSqueue,
  parseUsage,
  type QueueRow,
  SACCT_FIELDS,
  SQUEUE_FIELDS,
  USAGE_FIELDS,
} from "./parse.ts";

export const SLURM_COMMANDS = ["sbatch", "squeue", "sacct", "scancel", "srun"] as const;
export type SlurmCommand = (typeof SLURM_COMMANDS)[number];

export type SlurmErrorKind =
  /** The call did not finish in time; its group was killed. No answer. */
  | "timed_out"
  /** No answer: the command is not on PATH, or the controller/database could not be reached. */
  | "unreachable"
  /** An answer, and it is no: the scheduler (or our own validation, before any call) refused. */
  | "refused"
  /** Something came back, but not something we can read. No answer. */
  | "malformed";

export class SlurmCommandError extends Error {
  override readonly name = "SlurmCommandError";
  constructor(
    readonly command: SlurmCommand,
    readonly kind: SlurmErrorKind,
    message: string,
    readonly exitCode: number | null = null,
  ) {
    super(`${command}: ${kind}: ${message}`);
  }
}

export type BrokerResult<T> =
  | { readonly kind: "Answered"; readonly value: T }
  | { readonly kind: "Failed"; readonly error: SlurmCommandError };

// ---------------------------------------------------------------------------------------
// Validation: what may reach an argv
// ---------------------------------------------------------------------------------------

export type Validation =
  | { readonly kind: "Valid" }
  | { readonly kind: "Invalid"; readonly message: string };
const VALID: Validation = { kind: "Valid" };
const invalid = (message: string): Validation => ({ kind: "Invalid", message });

/** Job names and comments: our tokens and nothing that could separate fields or options. */
export const JOB_LABEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/**
 * Partition, QoS, account: administrator-chosen names. No comma (a comma makes a list: a
 * second partition the administrator did not choose), no colon, no spaces.
 */
export const SCHEDULER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/**
 * Credential-shaped names (the project-wide rule, src/orchestration/env-policy.ts), checked
 * again here because the broker is where a value would become visible to `scontrol show job`.
 */
export const CREDENTIAL_NAME_PATTERN = CREDENTIAL_ENV_NAME_PATTERN;
/**
 * Variables the scheduler's own tools read inside the job (an in-job srun obeys SLURM_NTASKS,
 * SRUN_*, ...): setting them would change how the allocation's tasks start.
 */
export const RESERVED_ENV_PREFIX = /^(SLURM_|SBATCH_|SRUN_|SALLOC_|SPANK_)/i;
const EXPORT_KEYWORDS: ReadonlySet<string> = new Set(["ALL", "NONE", "NIL"]);
const MAX_ENV_VALUE_CHARS = 8192;
const MAX_ENV_ENTRIES = 256;

export function validateJobLabel(what: string, value: string): Validation {
  return JOB_LABEL_PATTERN.test(value)
    ? VALID
    : invalid(
        `${what} must match ${JOB_LABEL_PATTERN.source}, got ${JSON.stringify(value.slice(0, 80))}`,
      );
}

export function validateSchedulerName(what: string, value: string): Validation {
  return SCHEDULER_NAME_PATTERN.test(value)
    ? VALID
    : invalid(
        `${what} must match ${SCHEDULER_NAME_PATTERN.source}, got ${JSON.stringify(value.slice(0, 80))}`,
      );
}

export function validateEnvName(name: string): Validation {
  if (!ENV_NAME_PATTERN.test(name)) {
    return invalid(
      `environment variable name ${JSON.stringify(name.slice(0, 80))} is not an identifier`,
    );
  }
  if (EXPORT_KEYWORDS.has(name.toUpperCase())) {
    return invalid(`environment variable name ${name} reads as an --export keyword`);
  }
  if (CREDENTIAL_NAME_PATTERN.test(name)) {
    return invalid(
      `environment variable ${name} looks like a credential: pass the path to a 0600 file instead`,
    );
  }
  const hijack = hijackReasonOf(name);
  if (hijack !== null) return invalid(`environment variable ${name} is refused: ${hijack}`);
  if (RESERVED_ENV_PREFIX.test(name)) {
    return invalid(`environment variable ${name} is reserved for the scheduler's own tools`);
  }
  return VALID;
}

export function validateEnvValue(name: string, value: string): Validation {
  if (value.length > MAX_ENV_VALUE_CHARS) {
    return invalid(`environment variable ${name} is longer than ${MAX_ENV_VALUE_CHARS} characters`);
  }
  if (value.includes(",")) {
    return invalid(`environment variable ${name} contains a comma, the --export separator`);
  }
  // Newline and NUL are named by the design; every other control character is refused with
  // them, since none survives the scheduler's environment handling unchanged.
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    return invalid(`environment variable ${name} contains a control character (newline, NUL, ...)`);
  }
  // Measured on 22.05: sbatch honours quotes when it splits the list, so X=it's,Y=b,Z=it's
  // sets X to "it's,Y=b,Z=it's" and drops Y and Z, and a lone quote is reported as an error
  // while the job is submitted anyway. Either quote lets one value swallow its neighbours.
  if (value.includes("'") || value.includes('"')) {
    return invalid(`environment variable ${name} contains a quote, which --export interprets`);
  }
  if (EXPORT_KEYWORDS.has(value.trim().toUpperCase())) {
    return invalid(`environment variable ${name} reads as the --export keyword ${value.trim()}`);
  }
  return VALID;
}

export function validateEnv(env: Readonly<Record<string, string>>): Validation {
  const entries = Object.entries(env);
  if (entries.length > MAX_ENV_ENTRIES) return invalid(`more than ${MAX_ENV_ENTRIES} variables`);
  for (const [name, value] of entries) {
    if (typeof value !== "string") return invalid(`environment variable ${name} is not a string`);
    const n = validateEnvName(name);
    if (n.kind === "Invalid") return n;
    const v = validateEnvValue(name, value);
    if (v.kind === "Invalid") return v;
  }
  return VALID;
}

/**
 * Paths we hand to the scheduler (working directory, log files, the script). Absolute, no
 * control characters, no `%` (sbatch expands %j, %u, ... in --output/--error) and no `\`
 * (which switches that expansion off), no `|` (a field separator in the listings we parse).
 */
export function validatePath(what: string, path: string): Validation {
  if (!path.startsWith("/")) return invalid(`${what} must be an absolute path`);
  if (path.length > 4096) return invalid(`${what} is longer than 4096 characters`);
  if (/[\u0000-\u001f\u007f%\\|]/.test(path)) {
    return invalid(`${what} contains a control character, %, \\ or |`);
  }
  return VALID;
}

function validateCount(what: string, n: number, min: number, max: number): Validation {
  return Number.isInteger(n) && n >= min && n <= max
    ? VALID
    : invalid(`${what} must be an integer in ${min}..${max}, got ${n}`);
}

function firstInvalid(checks: readonly Validation[]): Validation {
  return checks.find((c) => c.kind === "Invalid") ?? VALID;
}

/**
 * The one --export option sbatch and srun get: the bare word ALL, the only form that does not
 * imply --get-user-env (see the header). What ALL exports is the process environment the
 * broker builds with jobEnvironment, never the daemon's.
 */
export const EXPORT_OPTION = "--export=ALL";

/**
 * The whole process environment of sbatch/srun, and so of the job: the validated job env and
 * the scheduler's configuration file (the in-job launcher needs it too). Nothing else; in
 * particular no SBATCH_/SRUN_ variable (validateEnv refuses them) that the command would read
 * as an option.
 */
export function jobEnvironment(
  env: Readonly<Record<string, string>>,
  slurmConf: string | undefined,
): Readonly<Record<string, string>> {
  return { ...env, ...(slurmConf === undefined ? {} : { SLURM_CONF: slurmConf }) };
}

// ---------------------------------------------------------------------------------------
// Requests and their argv
// ---------------------------------------------------------------------------------------

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
}

export type ArgvResult =
  | { readonly kind: "Valid"; readonly argv: readonly string[] }
  | { readonly kind: "Invalid"; readonly message: string };

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
      `--output=${spec.stdoutPath}`,
      `--error=${spec.stderrPath}`,
      ...(spec.partition === null ? [] : [`--partition=${spec.partition}`]),
      ...(spec.qos === null ? [] : [`--qos=${spec.qos}`]),
      ...(spec.account === null ? [] : [`--account=${spec.account}`]),
      `--nodes=${spec.nodes}`,
      "--ntasks-per-node=1",
      `--cpus-per-task=${spec.cpusPerTask}`,
      ...(spec.gpusPerNode > 0 ? [`--gres=gpu:${spec.gpusPerNode}`] : []),
      ...(spec.memoryMb === null ? [] : [`--mem=${spec.memoryMb}M`]),
      ...(spec.timeLimitMinutes === null ? [] : [`--time=${spec.timeLimitMinutes}`]),
      ...warn,
      // One attempt is one epoch: a requeue would rerun the attempt under the same identity
      // (and a burned credential). A node failure ends the job; the reconciler decides.
      "--no-requeue",
      EXPORT_OPTION,
      spec.scriptPath,
    ],
  };
}

export function squeueArgv(names: readonly string[]): ArgvResult {
  const check = firstInvalid(names.map((n) => validateJobLabel("job name", n)));
  if (check.kind === "Invalid") return check;
  if (names.length === 0) return { kind: "Invalid", message: "no job names to list" };
  const format = SQUEUE_FIELDS.map((f, i) => `${f}:0${i < SQUEUE_FIELDS.length - 1 ? "|" : ""}`);
  return {
    kind: "Valid",
    argv: [
      "--noheader",
      // Every state: a job that ended less than MinJobAge ago is still here, which is what
      // closes the gap while accounting has not caught up yet.
      "--states=all",
      `--name=${names.join(",")}`,
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
 * Every job of the service account the controller holds that has not ended (squeue's default
 * states): one call, whatever the count, for the orphan sweep.
 */
export function liveJobsArgv(uid: number): ArgvResult {
  if (!Number.isInteger(uid) || uid < 0) return { kind: "Invalid", message: `bad uid ${uid}` };
  const format = LIVE_JOB_FIELDS.map(
    (f, i) => `${f}:0${i < LIVE_JOB_FIELDS.length - 1 ? "|" : ""}`,
  );
  return {
    kind: "Valid",
    argv: ["--noheader", `--user=${uid}`, `--Format=${format.join(",")}`],
  };
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
  ]);
  if (check.kind === "Invalid") return check;
  return {
    kind: "Valid",
    argv: [
      `--jobid=${spec.jobId}`,
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

// ---------------------------------------------------------------------------------------
// Reading outcomes
// ---------------------------------------------------------------------------------------

/**
 * Messages that mean "no answer": the controller, the database or the authentication daemon
 * could not be reached, or the reply was lost. Matched case-insensitively against the tool's
 * own error lines. sbatch's "Batch job submission failed: Socket timed out ..." is here on
 * purpose: the job may well exist, so it must be Unknown, never Rejected.
 */
export const UNREACHABLE_PATTERNS: readonly RegExp[] = [
  /unable to contact slurm controller/i,
  /socket timed out/i,
  /connection refused/i,
  /connection reset/i,
  /connection timed out/i,
  /communication connection failure/i,
  /zero bytes were transmitted or received/i,
  /problem talking to the database/i,
  /persist(ent)?[ _]conn/i,
  /slurmdbd.*(not responding|down|unavailable)/i,
  /slurm_load_jobs error: (?!invalid job id)/i,
  /temporarily unable/i,
  /temporarily unavailable/i,
  /transport endpoint/i,
  /no route to host/i,
  /network is unreachable/i,
  /munge/i,
  /authentication (error|failure)/i,
  /protocol authentication/i,
  /unable to (resolve|establish)/i,
  /backup controller/i,
  /could not (connect|establish)/i,
  // The client could not read slurm.conf (an admin mid-edit, a shared file system hiccup):
  // it never asked the controller, so a refused job would be a guess.
  /unable to process configuration file/i,
  /insane message length/i,
];

function errorLines(command: SlurmCommand, stderr: string): string {
  if (command !== "srun") return stderr;
  // A step's stderr is mostly the task's own output, which may say anything (a program
  // printing "connection refused" is not a scheduler outage): only srun's lines count.
  return stderr
    .split("\n")
    .filter((l) => l.startsWith("srun: error:") || l.startsWith("srun: fatal:"))
    .join("\n");
}

export function isUnreachableMessage(text: string): boolean {
  return UNREACHABLE_PATTERNS.some((p) => p.test(text));
}

function shorten(text: string): string {
  const t = text.trim();
  return t.length > 600 ? `${t.slice(0, 600)}...` : t;
}

export type Completed = Extract<ProcessOutcome, { kind: "Exited" }>;

/**
 * Turns a process outcome into "it ran to an exit" or a classified failure (never ran, ran out
 * of time, said too much). Whether the exit means an answer is the next question.
 */
export function classifyOutcome(
  command: SlurmCommand,
  outcome: ProcessOutcome,
  limits: { readonly timeoutMs: number; readonly maxOutputBytes: number },
): BrokerResult<Completed> {
  switch (outcome.kind) {
    case "NotFound":
      return failed(command, "unreachable", outcome.message);
    case "TimedOut":
      return failed(command, "timed_out", `no answer within ${limits.timeoutMs} ms`);
    case "Overflowed":
      return failed(command, "malformed", `output exceeded ${limits.maxOutputBytes} bytes`);
    case "Exited":
      if (outcome.exitCode === null) {
        const text = shorten(errorLines(command, outcome.stderr));
        return failed(command, "unreachable", `ended by ${outcome.signal ?? "a signal"} ${text}`);
      }
      return { kind: "Answered", value: outcome };
    default: {
      const never: never = outcome;
      throw new Error(`unhandled process outcome ${JSON.stringify(never)}`);
    }
  }
}

/** Only exit 0 is an answer to parse; a nonzero exit is unreachable or refused by its text. */
export function requireSuccess(
  command: SlurmCommand,
  completed: Completed,
): BrokerResult<Completed> {
  if (completed.exitCode === 0) return { kind: "Answered", value: completed };
  const text = errorLines(command, completed.stderr);
  const kind: SlurmErrorKind = isUnreachableMessage(text) ? "unreachable" : "refused";
  return failed(
    command,
    kind,
    shorten(text) || `exit code ${completed.exitCode}`,
    completed.exitCode,
  );
}

function failed<T>(
  command: SlurmCommand,
  kind: SlurmErrorKind,
  message: string,
  exitCode: number | null = null,
): BrokerResult<T> {
  return { kind: "Failed", error: new SlurmCommandError(command, kind, message, exitCode) };
}

function fromParsed<T>(command: SlurmCommand, parsed: Parsed<T>): BrokerResult<T> {
  return parsed.kind === "Parsed"
    ? { kind: "Answered", value: parsed.value }
    : failed(command, "malformed", parsed.message);
}

// ---------------------------------------------------------------------------------------
// The broker
// ---------------------------------------------------------------------------------------

export interface CancelAnswer {
  /** Ids the scheduler no longer had or had already finished: nothing left to stop. */
  readonly alreadyGone: readonly string[];
}

export interface StepOutcome {
  /** The task's exit code (srun's own refusals are classified as `refused` instead). */
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly truncated: boolean;
}

export interface SlurmBroker {
  submitBatch(spec: BatchSpec): Promise<BrokerResult<string>>;
  /** One squeue for all these job names, in every state the controller still remembers. */
  listQueue(names: readonly string[]): Promise<BrokerResult<readonly QueueRow[]>>;
  /** One sacct call. */
  listAccounting(query: AccountingQuery): Promise<BrokerResult<readonly AccountingRow[]>>;
  /** One squeue for every live job of this uid (any name: the sweep reads the comment). */
  listLiveJobs(uid: number): Promise<BrokerResult<readonly LiveJobRow[]>>;
  /** One sacct for what these ended jobs asked for and used (for a person-readable hint). */
  listUsage(jobIds: readonly string[]): Promise<BrokerResult<readonly JobUsage[]>>;
  /** One scancel for all these ids. */
  cancelJobs(jobIds: readonly string[]): Promise<BrokerResult<CancelAnswer>>;
  runStep(spec: StepSpec): Promise<BrokerResult<StepOutcome>>;
  /** Calls made so far, by command (attempts that reached a process, whatever their end). */
  callCounts(): Readonly<Record<SlurmCommand, number>>;
}

export interface SlurmBrokerOptions {
  readonly runner?: ProgramRunner;
  /**
   * Where the scheduler's commands are found, and SLURM_CONF if the site uses one. Nothing
   * else of the daemon's environment reaches the commands.
   */
  readonly path: string;
  readonly slurmConf?: string;
  /** For squeue, sacct, scancel and sbatch. */
  readonly commandTimeoutMs?: number;
  readonly maxOutputBytes?: number;
}

export const DEFAULT_COMMAND_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/** How long a step gets between SIGTERM (srun forwards it and ends the step) and SIGKILL. */
const STEP_KILL_GRACE_MS = 3_000;

/** The gone-already messages scancel prints for ids it has nothing to do for. */
const SCANCEL_GONE_LINE = /already completing or completed|Invalid job id specified/i;

/** srun's own refusals: the allocation is not there (any more) to hold a step. */
const SRUN_REFUSED =
  /srun: error: .*(Unable to create step|Unable to confirm allocation|Invalid job id|already completing or completed|has expired|not running|Requested node configuration is not available)/i;

export function createSlurmBroker(options: SlurmBrokerOptions): SlurmBroker {
  const runner = options.runner ?? createProgramRunner();
  const timeoutMs = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const baseEnv: Readonly<Record<string, string>> = {
    PATH: options.path,
    // Fixed wording: the unreachable patterns are English.
    LC_ALL: "C",
    LANG: "C",
    ...(options.slurmConf === undefined ? {} : { SLURM_CONF: options.slurmConf }),
  };
  // Listings print epoch seconds, so no time zone or locale decides what a timestamp means.
  // Only for the listings: every SLURM_* variable of sbatch's environment reaches the job.
  const listingEnv: Readonly<Record<string, string>> = { ...baseEnv, SLURM_TIME_FORMAT: "%s" };
  const envFor = (command: SlurmCommand) =>
    command === "squeue" || command === "sacct" ? listingEnv : baseEnv;
  const counts: Record<SlurmCommand, number> = {
    sbatch: 0,
    squeue: 0,
    sacct: 0,
    scancel: 0,
    srun: 0,
  };

  async function run(
    command: SlurmCommand,
    argv: ArgvResult,
    overrides: Partial<
      Pick<ProcessRequest, "timeoutMs" | "maxOutputBytes" | "overflow" | "killGraceMs" | "env">
    > = {},
  ): Promise<BrokerResult<Completed>> {
    if (argv.kind === "Invalid") {
      return failed(command, "refused", `refused before calling the scheduler: ${argv.message}`);
    }
    const request: ProcessRequest = {
      program: command,
      searchPath: options.path,
      args: argv.argv,
      env: envFor(command),
      timeoutMs,
      maxOutputBytes,
      overflow: "fail",
      killGraceMs: 0,
      ...overrides,
    };
    counts[command] += 1;
    return classifyOutcome(command, await runner.run(request), request);
  }

  async function query<T>(
    command: SlurmCommand,
    argv: ArgvResult,
    parse: (stdout: string) => Parsed<T>,
    env?: Readonly<Record<string, string>>,
  ): Promise<BrokerResult<T>> {
    const ran = await run(command, argv, env === undefined ? {} : { env });
    if (ran.kind === "Failed") return ran;
    const answered = requireSuccess(command, ran.value);
    if (answered.kind === "Failed") return answered;
    return fromParsed(command, parse(answered.value.stdout));
  }

  return {
    submitBatch: (spec) =>
      query(
        "sbatch",
        sbatchArgv(spec),
        parseSbatchParsable,
        jobEnvironment(spec.env, options.slurmConf),
      ),
    listQueue: (names) => query("squeue", squeueArgv(names), parseSqueue),
    listAccounting: (q) => query("sacct", sacctArgv(q), parseSacct),
    listUsage: (ids) => query("sacct", usageArgv(ids), parseUsage),
    listLiveJobs: (uid) => query("squeue", liveJobsArgv(uid), parseLiveJobs),

    async cancelJobs(jobIds) {
      const ran = await run("scancel", scancelArgv(jobIds));
      if (ran.kind === "Failed") return ran;
      const answered = requireSuccess("scancel", ran.value);
      if (answered.kind === "Answered") return { kind: "Answered", value: { alreadyGone: [] } };
      if (answered.error.kind !== "refused") return answered;
      // scancel exits 1 when any id was already finished or unknown, even though it cancelled
      // the others. That is an answer ("nothing left to stop there") unless some other error
      // is in the text too (permission denied is NOT a cancelled job).
      const stderr = ran.value.stderr;
      const errors = stderr.split("\n").filter((l) => /error/i.test(l));
      const goneLines = errors.filter((l) => SCANCEL_GONE_LINE.test(l));
      if (goneLines.length === 0 || goneLines.length !== errors.length) return answered;
      const alreadyGone = goneLines.flatMap((l) => {
        const id = /job id ([0-9]+)/i.exec(l)?.[1];
        return id === undefined ? [] : [id];
      });
      return { kind: "Answered", value: { alreadyGone } };
    },

    async runStep(spec) {
      const ran = await run("srun", srunArgv(spec), {
        timeoutMs: spec.timeoutMs,
        maxOutputBytes: spec.maxOutputBytes,
        overflow: "truncate",
        killGraceMs: STEP_KILL_GRACE_MS,
        env: jobEnvironment(spec.env, options.slurmConf),
      });
      if (ran.kind === "Failed") return ran;
      const { exitCode, stdout, stderr, truncated } = ran.value;
      if (exitCode !== 0) {
        // A nonzero exit is usually the task's own; it is srun failing only when srun's own
        // error lines say so.
        const own = errorLines("srun", stderr);
        if (isUnreachableMessage(own)) {
          return failed("srun", "unreachable", shorten(own), exitCode);
        }
        if (SRUN_REFUSED.test(own)) return failed("srun", "refused", shorten(own), exitCode);
      }
      return {
        kind: "Answered",
        value: { exitCode: exitCode ?? 1, stdout, stderr, truncated: truncated.length > 0 },
      };
    },

    callCounts() {
      return { ...counts };
    },
  };
}
