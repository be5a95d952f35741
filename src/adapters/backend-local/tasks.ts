/**
 * A step (`runTask`) in a running local allocation: the command wrapped like the
 * allocation's own launch (same sandbox paths, the job's environment), run through the
 * process runner with a timeout that kills its process group and output capped per stream.
 * The backend (backend.ts) decides first that the allocation is running.
 */

import { DEADLINE_ENV, deadlineEnvValue } from "../../core/deadline-env.ts";
import type { TaskResult } from "../../core/ports/allocation-backend.ts";
import type { LaunchWrapper, RunAs } from "../../core/sandbox.ts";
import { HELPER_ENV } from "../../core/sandbox.ts";
import type { ProcessOutcome, ProgramRunner } from "../../lib/process-runner.ts";
import { limitArgv } from "./job-limits.ts";
import { signalNumber } from "./job-state.ts";
import { sandboxPaths } from "./launch.ts";
import type { JobRecord } from "./records.ts";

/**
 * The step's command wrapped like its allocation's launch, in the allocation's own cgroup:
 * a step counts against the job's memory and processes.
 */
function stepArgv(
  record: JobRecord,
  command: readonly string[],
  options: { readonly wrapper: LaunchWrapper; readonly sandboxReadOnly: readonly string[] },
  vars: Readonly<Record<string, string>>,
  runAs: RunAs | null,
): readonly string[] {
  const paths = sandboxPaths(
    record.cwd,
    record.credentialDir,
    options.sandboxReadOnly,
    record.sharedTmpDir ?? null,
  );
  return limitArgv(
    record.limits,
    options.wrapper.wrap(
      command,
      { ...paths, ...(record.mounts === undefined ? {} : { mounts: record.mounts }) },
      { vars },
      runAs,
      { network: record.network ?? "host" },
    ),
  );
}

export async function runStep(
  record: JobRecord,
  command: readonly string[],
  options: {
    readonly wrapper: LaunchWrapper;
    readonly sandboxReadOnly: readonly string[];
    readonly programs: ProgramRunner;
    readonly timeoutMs: number;
    /** Per stream; the rest is drained and a note says it was cut. */
    readonly outputCapBytes: number;
    /**
     * The allocation's own deadline (epoch ms; null: no limit): the step gets the same
     * OPENAI4S_DEADLINE as the job it runs beside. The failure it guards: code run as a step
     * (a kernel's helper, an INV-4 task) saw no deadline and could not tell it was about to
     * be killed with its allocation.
     */
    readonly deadlineMs: number | null;
  },
): Promise<TaskResult> {
  const jobVars = record.jobEnv ?? record.env;
  const vars =
    options.deadlineMs === null
      ? jobVars
      : { ...jobVars, [DEADLINE_ENV]: deadlineEnvValue(options.deadlineMs) };
  // The step runs as its allocation does: the workspace's lease, claimed at its submit.
  let runAs: RunAs | null;
  try {
    runAs = options.wrapper.identities.claim(record.cwd);
  } catch (error) {
    return { kind: "Refused", message: `cannot tell who the step runs as: ${String(error)}` };
  }
  const [program, ...args] = stepArgv(record, command, options, vars, runAs);
  if (program === undefined) return { kind: "Refused", message: "empty command" };
  const outcome = await options.programs.run({
    program,
    args,
    env: HELPER_ENV,
    cwd: record.cwd,
    timeoutMs: options.timeoutMs,
    maxOutputBytes: options.outputCapBytes,
    // A chatty step keeps running; its output is cut, with a note.
    overflow: "truncate",
    killGraceMs: 0,
    // Leftovers in the group would hold the pipes open and the reads would never end.
    killGroupAfterExit: true,
  });
  switch (outcome.kind) {
    case "NotFound":
      return { kind: "Completed", exitCode: 127, stdout: "", stderr: `${outcome.message}\n` };
    case "Overflowed":
      // Unreachable with overflow "truncate"; said rather than guessed at.
      return { kind: "Unavailable", message: "the step's output overflowed" };
    case "TimedOut":
    case "Exited":
      break;
    default: {
      const never: never = outcome;
      throw new Error(`unhandled outcome ${JSON.stringify(never)}`);
    }
  }
  return stepResult(outcome, options);
}

/** A step that ran (to its end or its timeout) as its TaskResult, cuts and kill noted. */
function stepResult(
  outcome: Extract<ProcessOutcome, { readonly kind: "Exited" | "TimedOut" }>,
  options: { readonly timeoutMs: number; readonly outputCapBytes: number },
): TaskResult {
  const timedOut = outcome.kind === "TimedOut";
  const signalled =
    outcome.kind === "Exited" && outcome.signal !== null ? signalNumber(outcome.signal) : null;
  const exitCode =
    outcome.kind === "Exited" && outcome.exitCode !== null
      ? outcome.exitCode
      : timedOut
        ? 128 + (signalNumber("SIGKILL") ?? 9)
        : signalled === null
          ? 1
          : 128 + signalled;
  const truncated = outcome.kind === "Exited" ? outcome.truncated : [];
  const notes = [
    ...truncated.map(
      (stream) => `openai4s: ${stream} truncated at ${options.outputCapBytes} bytes`,
    ),
    ...(timedOut ? [`openai4s: task killed after its timeout of ${options.timeoutMs} ms`] : []),
  ];
  const stderrText = notes.length === 0 ? outcome.stderr : `${outcome.stderr}${notes.join("\n")}\n`;
  return { kind: "Completed", exitCode, stdout: outcome.stdout, stderr: stderrText };
}
