/**
 * The kernel's argv in its environment. The node's python3 runs as it is; an environment
 * with a prefix or module lines starts through bash, which puts the prefix's bin first on
 * PATH (so `!pip`, `subprocess` and compilers the kernel starts are the environment's, as
 * `source bin/activate` or `conda activate` would), runs the admin's module lines, and then
 * execs the interpreter: a module line that fails stops the start (`set -e`), naming itself
 * on stderr in the job's log, rather than running the kernel without what it loads.
 */

export interface KernelEnvironment {
  /** The venv or conda prefix; null: an interpreter of the node's own. */
  readonly prefix: string | null;
  /** Shell lines from the profile (`module load gcc/12`), run before the kernel. */
  readonly setupLines: readonly string[];
}

const SETUP_HEAD = [
  "set -e",
  'if [ -n "$1" ]; then PATH="$1/bin:$PATH"; VIRTUAL_ENV="$1"; CONDA_PREFIX="$1"; export PATH VIRTUAL_ENV CONDA_PREFIX; fi',
  "shift",
];

export function kernelArgv(
  python: string,
  args: readonly string[],
  environment: KernelEnvironment | undefined,
): readonly string[] {
  if (
    environment === undefined ||
    (environment.prefix === null && environment.setupLines.length === 0)
  ) {
    return [python, ...args];
  }
  // The lines are the admin's (the profile's), never a request's; the prefix and the
  // interpreter travel as positional arguments, never spliced into the script.
  const script = [...SETUP_HEAD, ...environment.setupLines, "set +e", 'exec "$@"'].join("\n");
  return ["/bin/bash", "-c", script, "openai4s-kernel", environment.prefix ?? "", python, ...args];
}
