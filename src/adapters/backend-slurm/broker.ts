/**
 * The subprocess boundary: every sbatch, squeue, sacct, scancel and srun call the daemon or
 * its CLI makes goes through here (check-config's `sbatch --test-only` included), with all
 * the parsing (parse.ts), so INV-9 is checkable in one place; test/leak-guard/
 * scheduler-calls.test.ts fails on a scheduler command spawned anywhere else in src/. The one
 * call that cannot come here runs inside the job itself: the batch script's own squeue for
 * its deadline (batch-script.ts says why).
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
  type ProcessRequest,
  type ProgramRunner,
} from "../../lib/process-runner.ts";
import {
  type AccountingQuery,
  type ArgvResult,
  type BatchSpec,
  listPieces,
  liveJobsArgv,
  type StepSpec,
  sacctArgv,
  sbatchArgv,
  scancelArgv,
  siteConfigArgv,
  squeueArgv,
  srunArgv,
  usageArgv,
} from "./broker-argv.ts";
import {
  type BrokerResult,
  type Completed,
  classifyOutcome,
  errorLines,
  failed,
  fromParsed,
  isUnreachableMessage,
  requireSuccess,
  shorten,
} from "./broker-outcomes.ts";
import { jobEnvironment } from "./broker-validation.ts";
import {
  type AccountingRow,
  type LiveJobRow,
  type Parsed,
  parseLiveJobs,
  parseSacct,
  parseSbatchParsable,
} from "./parse.ts";
import { parseSiteConfig, type SiteConfig } from "./parse-site-config.ts";
import { parseSqueue, type QueueRow, type SqueueMemo } from "./parse-squeue.ts";
import { type JobUsage, parseUsage } from "./parse-usage.ts";

// The scheduler's commands: named here, in the broker, and nowhere else in src/ (INV-9).
const SLURM_COMMANDS = ["sbatch", "squeue", "sacct", "scancel", "srun", "scontrol"] as const;
export type SlurmCommand = (typeof SLURM_COMMANDS)[number];

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
  /**
   * One squeue for all these job names, in every state the controller still remembers,
   * however many (it lists the service account's jobs and keeps these names' rows). With a
   * memo, a line printed as last time is not parsed again and yields the same row object,
   * and the same array of names asked again is taken as the same names (validated once):
   * a caller whose names change passes a new array.
   */
  listQueue(
    names: readonly string[],
    memo?: SqueueMemo,
  ): Promise<BrokerResult<readonly QueueRow[]>>;
  /** One sacct call (one per piece when the names or ids overflow one argument). */
  listAccounting(query: AccountingQuery): Promise<BrokerResult<readonly AccountingRow[]>>;
  /**
   * One squeue for every live job of the accounts listQueue lists (listUid: the service
   * account's, or every account's when jobs run as their owners), any name: the sweep reads
   * the comment.
   */
  listLiveJobs(): Promise<BrokerResult<readonly LiveJobRow[]>>;
  /**
   * One sacct for what these ended jobs asked for and used (for a person-readable hint); one
   * per piece when the ids overflow one argument.
   */
  listUsage(jobIds: readonly string[]): Promise<BrokerResult<readonly JobUsage[]>>;
  /** One scancel for all these ids. */
  cancelJobs(jobIds: readonly string[]): Promise<BrokerResult<CancelAnswer>>;
  runStep(spec: StepSpec): Promise<BrokerResult<StepOutcome>>;
  /** One `scontrol show config`: the site settings the daemon follows (parse-site-config.ts). */
  readSiteConfig(): Promise<BrokerResult<SiteConfig>>;
  /**
   * One `sbatch --test-only` (check-config --preflight): whatever sbatch said, exit code and
   * all, for the caller to judge; Failed only when it said nothing (not found, timed out,
   * killed, too much output). Refused before any call unless the argv asks for --test-only,
   * so this path can never queue a job.
   */
  testSubmission(argv: readonly string[]): Promise<BrokerResult<Completed>>;
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
  /**
   * The service account whose jobs squeue lists (the daemon's own uid by default); null: every
   * account's, for a daemon that submits jobs as their owners (`run_as = "owner"`), whose jobs
   * belong to the scientists and would be missing from the service account's list (read as
   * gone, then LOST, or never found by the orphan sweep). Both listings follow it.
   */
  readonly listUid?: number | null;
  /** For squeue, sacct, scancel and sbatch. */
  readonly commandTimeoutMs?: number;
  readonly maxOutputBytes?: number;
}

const DEFAULT_COMMAND_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
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
    scontrol: 0,
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

  const listUid = options.listUid === undefined ? (process.getuid?.() ?? 0) : options.listUid;
  interface QueueQuery {
    readonly names: readonly string[];
    readonly argv: ArgvResult;
    /** The rows kept: the same set object for as long as the same list is asked. */
    readonly wanted: ReadonlySet<string>;
  }
  /**
   * A list asked again with a parse memo (the change feed lists the same 10,000 names each
   * tick, and makes a new array only when what it watches changed) is validated and made a
   * set once: the same set lets the parse memo return the last rows when the listing did
   * not change either. What is validated and kept is the broker's own copy, so a caller
   * that changed its array after all could make an answer stale, never keep the rows of a
   * name that was not checked. The sign used to be a frozen array, but freezing an
   * array in Bun grows faster than the array (0.9, 23 and 333 ms at 1,000, 10,000 and
   * 100,000 names; isFrozen 0.1, 7 and 180 ms), paid in every tick whose watch set changed.
   */
  let lastQueue: QueueQuery | null = null;
  function queueQuery(names: readonly string[], memo: SqueueMemo | undefined): QueueQuery {
    if (memo !== undefined && lastQueue?.names === names) return lastQueue;
    const own = names.slice();
    const made = { names, argv: squeueArgv({ uid: listUid, names: own }), wanted: new Set(own) };
    lastQueue = memo === undefined ? null : made;
    return made;
  }

  /**
   * One query per piece of a list too long for one argument (listPieces), in turn, rows
   * joined; the first failure is the answer, as for a single call.
   */
  async function piecewise<T>(
    items: readonly string[],
    one: (piece: readonly string[]) => Promise<BrokerResult<readonly T[]>>,
  ): Promise<BrokerResult<readonly T[]>> {
    const pieces = listPieces(items);
    if (pieces.length <= 1) return one(items);
    const rows: T[] = [];
    for (const piece of pieces) {
      const answer = await one(piece);
      if (answer.kind === "Failed") return answer;
      rows.push(...answer.value);
    }
    return { kind: "Answered", value: rows };
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
    listQueue(names, memo) {
      const { argv, wanted } = queueQuery(names, memo);
      return query("squeue", argv, (stdout) => parseSqueue(stdout, memo, wanted));
    },
    listAccounting: (q) =>
      q.kind === "ByNames"
        ? piecewise(q.names, (names) => query("sacct", sacctArgv({ ...q, names }), parseSacct))
        : piecewise(q.jobIds, (jobIds) => query("sacct", sacctArgv({ ...q, jobIds }), parseSacct)),
    listUsage: (ids) => piecewise(ids, (piece) => query("sacct", usageArgv(piece), parseUsage)),
    listLiveJobs: () => query("squeue", liveJobsArgv(listUid), parseLiveJobs),

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

    readSiteConfig: () => query("scontrol", siteConfigArgv(), parseSiteConfig),

    testSubmission(argv) {
      if (!argv.includes("--test-only")) {
        return Promise.resolve(
          failed("sbatch", "refused", "refused before calling the scheduler: not a --test-only"),
        );
      }
      return run("sbatch", { kind: "Valid", argv });
    },

    callCounts() {
      return { ...counts };
    },
  };
}
