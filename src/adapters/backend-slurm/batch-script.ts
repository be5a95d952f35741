/**
 * The batch script: one of the very few places in the tree where a shell exists. sbatch runs
 * a script, not an argv, so the allocation's command has to be written as shell text; every
 * argument is therefore single-quoted, the one POSIX quoting form with no escapes inside it
 * (`$`, backquotes, backslashes, `!`, newlines and globs are all literal between single
 * quotes). A single quote itself is written as `'\''`: close, escaped quote, reopen.
 *
 * Nothing in the script comes from a user except inside those quotes, and the first command
 * line precedes every quoted argument, so an argument containing "\n#SBATCH --export=ALL"
 * is past the point where sbatch stops reading directives: the only directives that exist
 * are the options on sbatch's own argv.
 */
import { DEADLINE_ENV } from "../../core/deadline-env.ts";
import { NODE_ENV } from "./task-env.ts";
import { CLEANUP_SCRIPT, TASK_SCRIPT } from "./task-script.ts";

export type QuoteResult =
  | { readonly kind: "Quoted"; readonly text: string }
  /** NUL cannot be carried by argv at all; refusing is the only honest answer. */
  | { readonly kind: "Invalid"; readonly message: string };

/** POSIX single-quote quoting of one argument. */
export function shellQuote(arg: string): QuoteResult {
  if (arg.includes("\0")) return { kind: "Invalid", message: "argument contains NUL" };
  return { kind: "Quoted", text: `'${arg.replaceAll("'", `'\\''`)}'` };
}

/** Quotes every argument and joins them with single spaces, or names the first bad one. */
function shellQuoteAll(argv: readonly string[]): QuoteResult {
  const parts: string[] = [];
  for (const [index, arg] of argv.entries()) {
    const quoted = shellQuote(arg);
    if (quoted.kind === "Invalid") {
      return { kind: "Invalid", message: `argument ${index}: ${quoted.message}` };
    }
    parts.push(quoted.text);
  }
  return { kind: "Quoted", text: parts.join(" ") };
}

export type BatchBody =
  /** The workload's command runs as the batch step itself, on the first node. */
  | { readonly kind: "COMMAND"; readonly command: readonly string[] }
  /**
   * One worker per node, started by the in-allocation launcher. Each worker learns its rank
   * from the environment variable `rankEnv` that the launcher sets per task (SLURM_PROCID);
   * only that variable's NAME is on the command line, never a credential.
   */
  | {
      readonly kind: "WORKER";
      readonly launcher: string;
      readonly ranks: number;
      readonly workerCommand: readonly string[];
      readonly rankEnv: string;
    }
  /**
   * `count` copies of `command` (already wrapped in its sandbox), started by the launcher
   * from the batch script, each through TASK_SCRIPT on its node (see there).
   */
  | {
      readonly kind: "TASKS";
      readonly launcher: string;
      readonly count: number;
      readonly perNode: number | null;
      /** srun's --mpi (pmi2, pmix); null: the cluster's MpiDefault. */
      readonly mpi: string | null;
      /** Who owns the node's shared /tmp and /dev/shm (the job's uid); null: the launcher's. */
      readonly owner: { readonly uid: number; readonly gid: number } | null;
      readonly command: readonly string[];
    };

export type RenderResult =
  | { readonly kind: "Rendered"; readonly script: string }
  | { readonly kind: "Invalid"; readonly message: string };

/**
 * The launcher line of a WORKER script. `--export=ALL` hands each task the batch script's own
 * environment, which is already the validated `--export` list sbatch was given (plus the
 * scheduler's own variables): without it the tasks get an empty environment and the launcher
 * cannot even find the worker binary (measured: "execve(): ...: No such file or directory").
 * `--kill-on-bad-exit=1`: one dead worker ends the step, so a gang never runs half-present.
 */
function workerLaunchArgv(body: Extract<BatchBody, { kind: "WORKER" }>): readonly string[] {
  return [
    body.launcher,
    "--export=ALL",
    `--nodes=${body.ranks}`,
    `--ntasks=${body.ranks}`,
    "--ntasks-per-node=1",
    "--kill-on-bad-exit=1",
    ...body.workerCommand,
    "--rank-env",
    body.rankEnv,
    // What the worker calls its node when it reports (an environment missing there): the
    // scheduler's name for it, which the admin reads in sinfo, not the host's name.
    "--node-env",
    NODE_ENV,
  ];
}

/**
 * The launcher lines of a TASKS script. `--export=ALL` as for WORKER (the batch script's
 * environment is the validated --export list plus the scheduler's variables, and the task
 * script inherits only the allowlisted ones into the sandbox); `--kill-on-bad-exit=1`: one
 * dead rank ends the step, as MPI programs expect. The cleanup step runs whatever the tasks
 * did (`--overlap`: it must not wait for resources the ending step still holds); the job's
 * exit status is the tasks'.
 */
function tasksLines(body: Extract<BatchBody, { kind: "TASKS" }>): RenderResult {
  const launch = shellQuoteAll([
    body.launcher,
    "--export=ALL",
    `--ntasks=${body.count}`,
    ...(body.perNode === null ? [] : [`--ntasks-per-node=${body.perNode}`]),
    ...(body.mpi === null ? [] : [`--mpi=${body.mpi}`]),
    "--kill-on-bad-exit=1",
    "/bin/sh",
    "-c",
    TASK_SCRIPT,
    "openai4s-task",
    body.owner === null ? "-" : String(body.owner.uid),
    body.owner === null ? "-" : String(body.owner.gid),
    ...body.command,
  ]);
  if (launch.kind === "Invalid") return launch;
  const cleanupLauncher = shellQuoteAll([
    body.launcher,
    "--export=ALL",
    "--overlap",
    // Memory too is shared with a step still ending (a killed rank's): without this, the
    // cleanup was refused "Memory required by task is not available" and the node's
    // directory stayed behind.
    "--mem=0",
    "--ntasks-per-node=1",
  ]);
  const cleanupCommand = shellQuoteAll(["/bin/sh", "-c", CLEANUP_SCRIPT, "openai4s-cleanup"]);
  if (cleanupLauncher.kind === "Invalid") return cleanupLauncher;
  if (cleanupCommand.kind === "Invalid") return cleanupCommand;
  // One cleanup task on every node of the allocation (the scheduler's count, read here).
  const cleanup = `${cleanupLauncher.text} --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" ${cleanupCommand.text}`;
  return {
    kind: "Rendered",
    script: ["rc=0", `${launch.text} || rc=$?`, cleanup, 'exit "$rc"'].join("\n"),
  };
}

/** The variable a job (and a session's kernel) reads its deadline from, in epoch seconds. */
export { DEADLINE_ENV };

/**
 * OPENAI4S_DEADLINE from the scheduler's own end time for this job (start + limit, as it
 * will enforce it), read once when the job starts: the job and its kernel can then tell how
 * long they have left. Fixed text, nothing from a user; absent when the scheduler's query is
 * not on the job's PATH or has no end time (no limit).
 *
 * INV-9 (every scheduler call through the broker) is kept in spirit, not in letter: this
 * squeue is not the daemon's call. It runs inside the job, on the node, as the job's uid,
 * once, about its own job id only, where no broker exists; nothing the daemon decides hangs
 * on its answer, and it has no input from a user. The broker's discipline that matters is
 * still there: fixed argv text, a fixed time format, failure read as "no deadline" rather
 * than a wrong one. test/leak-guard/scheduler-calls.test.ts exempts this file for it alone.
 */
const DEADLINE_LINES = [
  `${DEADLINE_ENV}=$(SLURM_TIME_FORMAT=%s squeue -h -j "\${SLURM_JOB_ID:-0}" -o %e 2>/dev/null) || ${DEADLINE_ENV}=`,
  `case "$${DEADLINE_ENV}" in ''|*[!0-9]*) unset ${DEADLINE_ENV} ;; *) export ${DEADLINE_ENV} ;; esac`,
] as const;

/** The variable an element of a job array reads its index from, on every backend. */
export const ARRAY_INDEX_ENV = "OPENAI4S_ARRAY_INDEX";

/**
 * An array element's index under the name every backend gives it, from the scheduler's own
 * SLURM_ARRAY_TASK_ID (digits only, or the job is told nothing). Fixed text; only in the
 * script of an array, so a single job's script is what it always was.
 */
const ARRAY_INDEX_LINES = [
  `case "\${SLURM_ARRAY_TASK_ID:-}" in ''|*[!0-9]*) ;; *) export ${ARRAY_INDEX_ENV}="$SLURM_ARRAY_TASK_ID" ;; esac`,
] as const;

/** The script's fixed head: no argument precedes the first command line (see the top). */
function scriptOf(lines: string, head: readonly string[] = []): string {
  return [
    "#!/bin/sh",
    "# Written by openai4s. Every argument below is single-quoted; nothing is expanded.",
    // A command line before any quoted argument: sbatch stops reading #SBATCH directives
    // at the first line that is not a comment, so no argument can smuggle one in.
    "set -u",
    ...DEADLINE_LINES,
    ...head,
    lines,
    "",
  ].join("\n");
}

function renderTasksScript(
  body: Extract<BatchBody, { kind: "TASKS" }>,
  head: readonly string[],
): RenderResult {
  for (const [what, n] of [
    ["tasks", body.count],
    ["tasks per node", body.perNode ?? 1],
  ] as const) {
    if (!Number.isInteger(n) || n < 1) {
      return { kind: "Invalid", message: `${what} must be a positive integer, got ${n}` };
    }
  }
  if (body.mpi !== null && !/^[a-z][a-z0-9_]{0,31}$/.test(body.mpi)) {
    return { kind: "Invalid", message: "the MPI plugin name is not a plugin name" };
  }
  if (body.command.length === 0 || body.command[0] === "") {
    return { kind: "Invalid", message: "the command is empty" };
  }
  const lines = tasksLines(body);
  return lines.kind === "Invalid"
    ? lines
    : { kind: "Rendered", script: scriptOf(lines.script, head) };
}

export function renderBatchScript(
  body: BatchBody,
  options: { readonly array?: boolean } = {},
): RenderResult {
  // Only in the script of an array, so a single job's script is what it always was.
  const head = options.array === true ? ARRAY_INDEX_LINES : [];
  let argv: readonly string[];
  switch (body.kind) {
    case "COMMAND":
      argv = body.command;
      break;
    case "WORKER":
      if (!Number.isInteger(body.ranks) || body.ranks < 1) {
        return { kind: "Invalid", message: `ranks must be a positive integer, got ${body.ranks}` };
      }
      if (!/^[A-Z_][A-Z0-9_]*$/.test(body.rankEnv)) {
        return { kind: "Invalid", message: "rank variable name is not an identifier" };
      }
      argv = workerLaunchArgv(body);
      break;
    case "TASKS":
      return renderTasksScript(body, head);
    default: {
      const never: never = body;
      throw new Error(`unhandled batch body ${JSON.stringify(never)}`);
    }
  }
  const program = argv[0];
  if (program === undefined || program === "") {
    return { kind: "Invalid", message: "the command is empty" };
  }
  // bash's `exec` takes options (-a, -c, -l); dash's does not. A program name starting with
  // "-" would mean different things under different /bin/sh, so it is refused outright.
  if (program.startsWith("-")) {
    return { kind: "Invalid", message: "the program name must not start with '-'" };
  }
  const quoted = shellQuoteAll(argv);
  if (quoted.kind === "Invalid") return quoted;
  return { kind: "Rendered", script: scriptOf(`exec ${quoted.text}`, head) };
}
