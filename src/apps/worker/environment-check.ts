/**
 * Whether the session's environment can run on this node, checked by the worker before it
 * starts the kernel. The daemon checks what it can on its own machine, but on a cluster the
 * node is elsewhere: a prefix installed on the login node only, or a module the nodes lack,
 * used to end the session FAILED "exit code 1" (the sandbox could not bind the prefix), or
 * leave it running with a kernel that died at every start (a failed module line). The
 * worker says what is missing instead, naming the path (or the line) and the node.
 *
 * Only what the worker was given is looked at: the profile's prefix, interpreter and module
 * lines, as the daemon put them on its argv (never a request's path). The module lines run
 * once more than the kernel's start runs them, in a shell of their own, so that the line
 * that failed can be named; their output is kept for the message, not the job's log.
 */
import { accessSync, constants, statSync } from "node:fs";
import type { Timers } from "../../lib/clock.ts";
import type { KernelEnvironment } from "./kernel-launch.ts";

export interface CheckedEnvironment extends KernelEnvironment {
  /** The profile's name for it, as the session chose it. */
  readonly name: string;
  /** The interpreter the kernel runs (the prefix's bin/python, or the profile's own). */
  readonly python: string;
}

/** How long the module lines may take here; a line that hangs would hang the kernel too. */
export const SETUP_CHECK_TIMEOUT_MS = 120_000;
/**
 * What of a failed line's own output goes into the message: its first words, where Lmod
 * (and a shell's "command not found") say what went wrong; the rest is advice.
 */
const OUTPUT_CHARS = 300;
const LINE_CHARS = 200;

/** The first problem of `environment` on node `node`, or null when it can run here. */
export async function environmentProblem(
  environment: CheckedEnvironment,
  node: string,
  options: { readonly timers: Timers; readonly timeoutMs?: number },
): Promise<string | null> {
  const missing = missingPath(environment, node);
  if (missing !== null) return missing;
  if (environment.setupLines.length === 0) return null;
  return failedSetupLine(
    environment,
    node,
    options.timeoutMs ?? SETUP_CHECK_TIMEOUT_MS,
    options.timers,
  );
}

/** The prefix (a directory) and the interpreter (an executable file), in that order. */
export function missingPath(environment: CheckedEnvironment, node: string): string | null {
  const what = `environment ${JSON.stringify(environment.name)}`;
  if (environment.prefix !== null && !isDirectory(environment.prefix)) {
    return `${what}: ${environment.prefix} is not on node ${node}`;
  }
  if (!isFile(environment.python)) return `${what}: ${environment.python} is not on node ${node}`;
  try {
    accessSync(environment.python, constants.X_OK);
  } catch {
    return `${what}: ${environment.python} is not executable on node ${node}`;
  }
  return null;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The module lines, run as the kernel's start runs them (`set -e`, the prefix's bin first on
 * PATH), each preceded by its index in a variable the EXIT trap reports on fd 3 with the
 * status: a line that fails stops the shell, and its index names it. Their stdout goes to
 * stderr, so fd 3 carries nothing but the verdict.
 */
export function setupCheckScript(lines: readonly string[]): string {
  return [
    "exec 3>&1 1>&2",
    `trap 'openai4s_status=$?; [ "$openai4s_status" = 0 ] || echo "$openai4s_line $openai4s_status" >&3' EXIT`,
    "openai4s_line=-",
    "set -e",
    'if [ -n "$1" ]; then PATH="$1/bin:$PATH"; VIRTUAL_ENV="$1"; CONDA_PREFIX="$1"; export PATH VIRTUAL_ENV CONDA_PREFIX; fi',
    ...lines.flatMap((line, i) => [`openai4s_line=${i}`, line]),
    "openai4s_line=-",
  ].join("\n");
}

async function failedSetupLine(
  environment: CheckedEnvironment,
  node: string,
  timeoutMs: number,
  timers: Timers,
): Promise<string | null> {
  const what = `environment ${JSON.stringify(environment.name)}`;
  let p: ReturnType<typeof spawnCheck>;
  try {
    p = spawnCheck(environment);
  } catch (error) {
    return `${what}: cannot run its module lines on node ${node}: ${String(error)}`;
  }
  let timedOut = false;
  const cancel = timers.after(timeoutMs, () => {
    timedOut = true;
    killGroup(p);
  });
  const [verdict, output, status] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]).finally(cancel);
  if (timedOut) {
    const bound = timeoutMs < 1000 ? `${timeoutMs} ms` : `${Math.round(timeoutMs / 1000)} s`;
    return `${what}: its module lines did not finish within ${bound} on node ${node}`;
  }
  if (status === 0) return null;
  const match = /^(\d+) (\d+)$/m.exec(verdict);
  const line = match === null ? undefined : environment.setupLines[Number(match[1])];
  const said = firstWords(output);
  const how = `(exit ${match === null ? status : match[2]}) on node ${node}${said === "" ? "" : `: ${said}`}`;
  return line === undefined
    ? `${what}: its module lines failed ${how}`
    : `${what}: module line ${JSON.stringify(line.slice(0, LINE_CHARS))} failed ${how}`;
}

function spawnCheck(environment: CheckedEnvironment) {
  return Bun.spawn(
    [
      "/bin/bash",
      "-c",
      setupCheckScript(environment.setupLines),
      "openai4s-environment-check",
      environment.prefix ?? "",
    ],
    // Its own process group, as the kernel's: a timeout kills what the lines started too.
    { stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true },
  );
}

function killGroup(p: { readonly pid: number; kill(signal: "SIGKILL"): void }): void {
  try {
    process.kill(-p.pid, "SIGKILL");
  } catch {
    p.kill("SIGKILL");
  }
}

/** The first words of a failed line's output, on one line (Lmod's error box included). */
function firstWords(output: string): string {
  const flat = output.replace(/\s+/g, " ").trim();
  return flat.length <= OUTPUT_CHARS ? flat : `${flat.slice(0, OUTPUT_CHARS)}...`;
}
