/**
 * Profiles' named environments (a venv or conda prefix, or an interpreter, with optional
 * environment-module lines), as both backends' config files declare them:
 *
 *   [profiles.NAME.environments.ENV]
 *   display_name = "Python 3 (torch)"
 *   prefix = "/opt/envs/torch"        # or: python = "/opt/python3.12/bin/python3"
 *   modules = """
 *   . /usr/share/lmod/lmod/init/bash
 *   module load cuda/12
 *   """
 *
 * Pure: the readers hand in the table they parsed (the same tree shape in both), and a
 * refusal names the line and the key. What a request may choose is only a name; every path
 * here is the admin's.
 */
import type { ProfileEnvironment, ResourceProfile } from "./models.ts";

/** The shape of both backends' TOML readers' trees (structural: no adapter is imported). */
export type EnvironmentTomlNode =
  | {
      readonly kind: "value";
      readonly value: string | number | boolean;
      readonly position: { readonly line: number };
    }
  | EnvironmentTomlTable;
export interface EnvironmentTomlTable {
  readonly kind: "table";
  readonly entries: ReadonlyMap<string, EnvironmentTomlNode>;
  readonly position: { readonly line: number };
}

export type EnvironmentsRead =
  | { readonly kind: "Valid"; readonly environments: readonly ProfileEnvironment[] }
  | { readonly kind: "Refused"; readonly line: number; readonly message: string };

/** Like a profile's name, without `/`: the kernelspec is `PROFILE/ENV`. */
export const ENVIRONMENT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const KEYS = ["display_name", "prefix", "python", "modules"] as const;
const MAX_MODULE_LINES = 50;

/** Absolute, normalized, printable ASCII without spaces (it is bound and exec'd as is). */
function pathProblem(path: string): string | null {
  if (!path.startsWith("/") || path === "/") return "must be an absolute path below /";
  if (!/^[\x21-\x7e]+$/.test(path)) return "must be printable ASCII without spaces";
  if (
    path
      .split("/")
      .slice(1)
      .some((p) => p === "" || p === "." || p === "..")
  ) {
    return "must be a normalized path (no //, . or .. and no trailing /)";
  }
  return null;
}

function readOne(
  where: string,
  name: string,
  table: EnvironmentTomlTable,
): EnvironmentsRead | ProfileEnvironment {
  const refuse = (line: number, message: string): EnvironmentsRead => ({
    kind: "Refused",
    line,
    message,
  });
  if (!ENVIRONMENT_NAME.test(name)) {
    return refuse(
      table.position.line,
      `environment name ${JSON.stringify(name)} must match ${ENVIRONMENT_NAME.source}`,
    );
  }
  const values = new Map<string, string>();
  for (const [key, node] of table.entries) {
    if (!(KEYS as readonly string[]).includes(key)) {
      return refuse(
        node.position.line,
        `unknown key ${JSON.stringify(key)} in ${where} (known keys: ${KEYS.join(", ")})`,
      );
    }
    if (node.kind !== "value" || typeof node.value !== "string") {
      return refuse(node.position.line, `${where}.${key} must be a string`);
    }
    values.set(key, node.value);
  }
  const prefix = values.get("prefix") ?? null;
  const python = values.get("python") ?? null;
  if ((prefix === null) === (python === null)) {
    return refuse(
      table.position.line,
      `${where} needs exactly one of prefix (a venv or conda env) or python (an interpreter)`,
    );
  }
  for (const [key, path] of [
    ["prefix", prefix],
    ["python", python],
  ] as const) {
    const problem = path === null ? null : pathProblem(path);
    if (problem !== null)
      return refuse(
        table.entries.get(key)?.position.line ?? table.position.line,
        `${where}.${key} ${problem}`,
      );
  }
  const moduleLines = (values.get("modules") ?? "")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  if (moduleLines.length > MAX_MODULE_LINES) {
    return refuse(
      table.entries.get("modules")?.position.line ?? 1,
      `${where}.modules has more than ${MAX_MODULE_LINES} lines`,
    );
  }
  const display = values.get("display_name");
  if (
    display !== undefined &&
    (display.trim() === "" || display.length > 200 || /[\r\n]/.test(display))
  ) {
    return refuse(
      table.entries.get("display_name")?.position.line ?? 1,
      `${where}.display_name must be one non-empty line of at most 200 characters`,
    );
  }
  return {
    name,
    displayName: display ?? `Python (${name})`,
    python: python ?? `${prefix}/bin/python`,
    prefix,
    moduleLines,
  };
}

/** A profile's `environments` table (`[profiles.P.environments.E]` each), or its refusal. */
export function readEnvironments(profile: string, node: EnvironmentTomlNode): EnvironmentsRead {
  const where = `[profiles.${profile}.environments]`;
  if (node.kind !== "table") {
    return {
      kind: "Refused",
      line: node.position.line,
      message: `${where} must be a table of [profiles.${profile}.environments.NAME] tables`,
    };
  }
  const out: ProfileEnvironment[] = [];
  for (const [name, child] of node.entries) {
    const here = `[profiles.${profile}.environments.${name}]`;
    if (child.kind !== "table") {
      return { kind: "Refused", line: child.position.line, message: `${here} must be a table` };
    }
    const read = readOne(here, name, child);
    if ("kind" in read) return read;
    out.push(read);
  }
  return { kind: "Valid", environments: out };
}

export type EnvironmentChoice =
  | { readonly kind: "None" }
  | { readonly kind: "Found"; readonly environment: ProfileEnvironment }
  | { readonly kind: "Unknown"; readonly message: string };

/** The environment a SESSION asked for on its profile (admission's and the preparer's rule). */
export function chooseEnvironment(
  profile: ResourceProfile,
  name: string | undefined,
): EnvironmentChoice {
  if (name === undefined) return { kind: "None" };
  const found = (profile.environments ?? []).find((e) => e.name === name);
  if (found !== undefined) return { kind: "Found", environment: found };
  const known = (profile.environments ?? []).map((e) => e.name).join(", ") || "none";
  return {
    kind: "Unknown",
    message: `unknown environment ${JSON.stringify(name)} on profile "${profile.name}" (known: ${known})`,
  };
}

/**
 * The worker's arguments for an environment: its name (the worker checks it on the node and
 * names it in what it reports), the interpreter, and each module line (run by a shell before
 * the kernel). Paths and lines only: nothing a request wrote.
 */
export function environmentWorkerArgs(environment: ProfileEnvironment): readonly string[] {
  return [
    "--environment-name",
    environment.name,
    "--python",
    environment.python,
    ...(environment.prefix === null ? [] : ["--environment-prefix", environment.prefix]),
    ...environment.moduleLines.flatMap((line) => ["--kernel-setup", line]),
  ];
}
