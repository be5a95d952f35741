/**
 * Where the daemon's state dir is, as a path only: `--state-dir`, `$OPENAI4S_STATE_DIR`,
 * `$XDG_STATE_HOME/openai4s`, `~/.local/state/openai4s` (INTERFACE.md). Kept apart from
 * state-dir.ts (which creates the directory and makes it private) so that a client command
 * finding the default socket loads no filesystem code (start-up: bench/startup.bench.ts).
 */
import { UsageError } from "../../lib/command/command.ts";
import { isAbsolutePath, joinPath, resolveFrom } from "../../lib/posix-path.ts";

const STATE_DIR_ENV = "OPENAI4S_STATE_DIR";

export type StateDirSource = "flag" | "env" | "xdg" | "home";

export interface ResolvedStateDir {
  readonly path: string;
  readonly source: StateDirSource;
}

export interface StateDirInputs {
  readonly flag: string | undefined;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly homeDir: string;
  /** Asked only to resolve a relative flag or variable (posix-path.ts: resolveFrom). */
  readonly cwd: () => string;
}

/** An empty variable counts as unset, as shells make unsetting awkward. */
export function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}

export function resolveStateDir(inputs: StateDirInputs): ResolvedStateDir {
  // An explicit empty flag is a mistake (an unset shell variable), not a request for the
  // default: silently using ~/.local/state would start a second, empty daemon.
  if (inputs.flag === "") throw new UsageError("--state-dir must not be empty");
  const flag = nonEmpty(inputs.flag);
  if (flag !== undefined) return { path: resolveFrom(inputs.cwd, flag), source: "flag" };
  const env = nonEmpty(inputs.env[STATE_DIR_ENV]);
  if (env !== undefined) return { path: resolveFrom(inputs.cwd, env), source: "env" };
  // The XDG spec says a relative XDG_STATE_HOME is invalid and must be ignored.
  const xdg = nonEmpty(inputs.env["XDG_STATE_HOME"]);
  if (xdg !== undefined && isAbsolutePath(xdg)) {
    return { path: joinPath(xdg, "openai4s"), source: "xdg" };
  }
  return { path: joinPath(inputs.homeDir, ".local", "state", "openai4s"), source: "home" };
}
