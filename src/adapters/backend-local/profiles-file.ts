/**
 * The local backend's profiles from a file (`serve --local-profiles FILE`): one
 * `[profiles.NAME]` table each, in the same strict TOML subset as the cluster backend's
 * config (the composition root hands in that reader, so every refusal has a line). A key
 * not listed here, a value of the wrong type or out of range, and a profile that allows no
 * kind of work are refused, naming the line and the key: a misspelt `netwrok = "host"`
 * silently ignored would be a policy not applied.
 *
 * `network` is the one key that matters most: a profile's jobs get the host's network only
 * when the file says `network = "host"`. Left out, it is OPENAI4S_LOCAL_NETWORK when that is
 * set, else `none` (its own namespace, loopback only): an admin who writes profiles opts a
 * profile into the host's loopback services, rather than out of them.
 */
import { availableParallelism } from "node:os";
import { readEnvironments } from "../../core/environments.ts";
import type {
  ProfileEnvironment,
  ProfileNetwork,
  ResourceMaxima,
  ResourceProfile,
  WorkloadKind,
} from "../../core/models.ts";
import { DEFAULT_LOCAL_MAX_ARRAY_SIZE, LOCAL_MAX_ARRAY_SIZE_CEILING } from "./backend-options.ts";

/** The shape of the subset reader's tree (structurally the same type; no import needed). */
export interface ProfilesTomlPosition {
  readonly line: number;
  readonly column: number;
}
export type ProfilesTomlNode =
  | {
      readonly kind: "value";
      readonly value: string | number | boolean;
      readonly position: ProfilesTomlPosition;
    }
  | ProfilesTomlTable;
export interface ProfilesTomlTable {
  readonly kind: "table";
  readonly entries: ReadonlyMap<string, ProfilesTomlNode>;
  readonly position: ProfilesTomlPosition;
}
export type ProfilesTomlRead =
  | { readonly kind: "Parsed"; readonly root: ProfilesTomlTable }
  | { readonly kind: "Refused"; readonly line: number; readonly message: string };

/** What a profile gets for a key it leaves out (from the daemon's environment, else built in). */
export interface LocalProfileDefaults {
  readonly memoryMb: number;
  readonly pidsMax: number;
  /** OPENAI4S_LOCAL_NETWORK when set; null: `none`. */
  readonly network: ProfileNetwork | null;
  readonly warnBeforeLimitSeconds: number | null;
}

export type LocalProfilesFile =
  | { readonly kind: "Valid"; readonly profiles: readonly ResourceProfile[] }
  | { readonly kind: "ConfigError"; readonly message: string };

const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_DESCRIPTION_CHARS = 200;

type Spec =
  | { readonly type: "string"; readonly check: (value: string) => string | null }
  | { readonly type: "integer"; readonly min: number; readonly max: () => number }
  | { readonly type: "boolean" };

const KEYS: Readonly<Record<string, Spec>> = {
  description: {
    type: "string",
    check: (s) =>
      s.trim() === "" || s.length > MAX_DESCRIPTION_CHARS || /[\r\n]/.test(s)
        ? `must be one non-empty line of at most ${MAX_DESCRIPTION_CHARS} characters`
        : null,
  },
  network: {
    type: "string",
    check: (s) => (s === "host" || s === "none" ? null : 'must be "host" or "none"'),
  },
  // More CPUs than the machine has would be a promise nobody can keep.
  cpus: { type: "integer", min: 1, max: () => availableParallelism() },
  memory_mb: { type: "integer", min: 16, max: () => 2 ** 40 },
  pids_max: { type: "integer", min: 16, max: () => 4_194_304 },
  time_limit_minutes: { type: "integer", min: 1, max: () => 100_000_000 },
  // How far a submission may raise cpus, memory_mb and time_limit_minutes (`resources`,
  // `timeLimitSeconds`); absent: the default is also the maximum.
  max_cpus: { type: "integer", min: 1, max: () => availableParallelism() },
  max_memory_mb: { type: "integer", min: 16, max: () => 2 ** 40 },
  max_time_limit_minutes: { type: "integer", min: 1, max: () => 100_000_000 },
  warn_minutes_before_limit: { type: "integer", min: 0, max: () => 1_092 },
  // 0: the profile runs no job arrays. Absent: DEFAULT_LOCAL_MAX_ARRAY_SIZE.
  max_array_size: { type: "integer", min: 0, max: () => LOCAL_MAX_ARRAY_SIZE_CEILING },
  // A session cell's output sent per stream; past it the whole output goes to a file.
  max_output_chars: { type: "integer", min: 1_000, max: () => 100_000_000 },
  allow_batch: { type: "boolean" },
  allow_sessions: { type: "boolean" },
};

function refusal(file: string, line: number, message: string): LocalProfilesFile {
  return { kind: "ConfigError", message: `${file}:${line}: ${message}` };
}

/** The problem with one key's value, or null. */
function keyProblem(key: string, node: ProfilesTomlNode, spec: Spec): string | null {
  if (node.kind === "table") return `${key} must be a ${spec.type}, not a table`;
  const value = node.value;
  switch (spec.type) {
    case "string":
      if (typeof value !== "string") return `${key} must be a string, not ${typeof value}`;
      return prefixed(key, spec.check(value));
    case "integer":
      if (typeof value !== "number") return `${key} must be an integer, not ${typeof value}`;
      return value >= spec.min && value <= spec.max()
        ? null
        : `${key} must be from ${spec.min} to ${spec.max()}`;
    case "boolean":
      return typeof value === "boolean" ? null : `${key} must be a boolean, not ${typeof value}`;
    default: {
      const never: never = spec;
      throw new Error(`unhandled key spec ${JSON.stringify(never)}`);
    }
  }
}

function prefixed(key: string, problem: string | null): string | null {
  return problem === null ? null : `${key} ${problem}`;
}

/** One `[profiles.NAME]` table, or the refusal naming its first problem. */
function readProfile(
  file: string,
  name: string,
  node: ProfilesTomlNode,
  defaults: LocalProfileDefaults,
): ResourceProfile | LocalProfilesFile {
  const where = `[profiles.${name}]`;
  if (node.kind !== "table") {
    return refusal(file, node.position.line, `profiles.${name} must be a table: write ${where}`);
  }
  if (!PROFILE_NAME.test(name)) {
    return refusal(
      file,
      node.position.line,
      `profile name ${JSON.stringify(name)} must match ${PROFILE_NAME.source}`,
    );
  }
  const values = new Map<string, string | number | boolean>();
  let environments: readonly ProfileEnvironment[] = [];
  for (const [key, child] of node.entries) {
    if (key === "environments") {
      const read = readEnvironments(name, child);
      if (read.kind === "Refused") return refusal(file, read.line, read.message);
      environments = read.environments;
      continue;
    }
    const spec = Object.hasOwn(KEYS, key) ? KEYS[key] : undefined;
    if (spec === undefined) {
      const known = [...Object.keys(KEYS), "environments"].join(", ");
      return refusal(
        file,
        child.position.line,
        `unknown key ${JSON.stringify(key)} in ${where} (known keys: ${known})`,
      );
    }
    const problem = keyProblem(`profiles.${name}.${key}`, child, spec);
    if (problem !== null) return refusal(file, child.position.line, problem);
    if (child.kind === "value") values.set(key, child.value);
  }
  const description = values.get("description");
  if (typeof description !== "string") {
    return refusal(file, node.position.line, `${where} has no description`);
  }
  const kinds: WorkloadKind[] = [];
  if (values.get("allow_sessions") === true) kinds.push("SESSION");
  if (values.get("allow_batch") === true) kinds.push("BATCH");
  if (kinds.length === 0) {
    return refusal(
      file,
      node.position.line,
      `${where} allows no kind of work: set allow_batch = true and/or allow_sessions = true`,
    );
  }
  const num = (key: string): number | null => {
    const value = values.get(key);
    return typeof value === "number" ? value : null;
  };
  const minutes = num("time_limit_minutes");
  const warnMinutes = num("warn_minutes_before_limit");
  const warnSeconds = warnMinutes === null ? defaults.warnBeforeLimitSeconds : warnMinutes * 60;
  const resources = {
    nodes: 1,
    cpus: num("cpus") ?? availableParallelism(),
    gpus: 0,
    memoryMb: num("memory_mb") ?? defaults.memoryMb,
    timeLimitSeconds: minutes === null ? null : minutes * 60,
  };
  const maxima = maximaOf(file, where, node, num, resources);
  if ("kind" in maxima) return maxima;
  return {
    name,
    description,
    kinds,
    resources,
    ...(Object.keys(maxima).length === 0 ? {} : { maxima }),
    pidsMax: num("pids_max") ?? defaults.pidsMax,
    ...arrayLimit(num("max_array_size")),
    ...(num("max_output_chars") === null ? {} : { maxOutputChars: num("max_output_chars") ?? 0 }),
    network: (values.get("network") as ProfileNetwork | undefined) ?? defaults.network ?? "none",
    ...(warnSeconds === null ? {} : { warnBeforeLimitSeconds: warnSeconds }),
    ...(environments.length === 0 ? {} : { environments }),
  };
}

/**
 * `max_cpus`, `max_memory_mb`, `max_time_limit_minutes`, each at least its default: a maximum
 * below it would refuse the profile's own default. A time maximum needs a default, or a job
 * asking for none would run with no limit, past the maximum.
 */
function maximaOf(
  file: string,
  where: string,
  node: ProfilesTomlTable,
  num: (key: string) => number | null,
  resources: ResourceProfile["resources"],
): ResourceMaxima | LocalProfilesFile {
  const maxima: { cpus?: number; memoryMb?: number; timeLimitSeconds?: number } = {};
  const checks = [
    ["max_cpus", "cpus", resources.cpus, 1],
    ["max_memory_mb", "memory_mb", resources.memoryMb, 1],
    ["max_time_limit_minutes", "time_limit_minutes", resources.timeLimitSeconds, 60],
  ] as const;
  for (const [key, of, value, scale] of checks) {
    const max = num(key);
    if (max === null) continue;
    const line = node.entries.get(key)?.position.line ?? node.position.line;
    if (value === null) {
      return refusal(
        file,
        line,
        `${where} ${key} needs ${of} (the limit of a workload that asks for none)`,
      );
    }
    if (max * scale < value) {
      return refusal(file, line, `${where} ${key} (${max}) is below ${of} (${value / scale})`);
    }
    if (key === "max_cpus") maxima.cpus = max;
    else if (key === "max_memory_mb") maxima.memoryMb = max;
    else maxima.timeLimitSeconds = max * 60;
  }
  return maxima;
}

/** `max_array_size`: absent, the default; 0, no arrays (admission then refuses `array`). */
function arrayLimit(maxArraySize: number | null): Pick<ResourceProfile, "maxArraySize"> {
  const size = maxArraySize ?? DEFAULT_LOCAL_MAX_ARRAY_SIZE;
  return size === 0 ? {} : { maxArraySize: size };
}

/** The profiles of a file the subset reader has read; `file` names it in every refusal. */
export function localProfilesFromToml(
  file: string,
  read: ProfilesTomlRead,
  defaults: LocalProfileDefaults,
): LocalProfilesFile {
  if (read.kind === "Refused") return refusal(file, read.line, read.message);
  for (const [key, node] of read.root.entries) {
    if (key !== "profiles" || node.kind !== "table") {
      return refusal(
        file,
        node.position.line,
        `unknown ${node.kind === "table" ? "table" : "key"} ${JSON.stringify(key)} (the file has [profiles.NAME] tables only)`,
      );
    }
  }
  const table = read.root.entries.get("profiles");
  const profiles: ResourceProfile[] = [];
  if (table?.kind === "table") {
    for (const [name, node] of table.entries) {
      const profile = readProfile(file, name, node, defaults);
      if ("kind" in profile) return profile;
      profiles.push(profile);
    }
  }
  if (profiles.length === 0) {
    return refusal(
      file,
      table?.position.line ?? 1,
      "no profile is defined: add a [profiles.NAME] table",
    );
  }
  return { kind: "Valid", profiles };
}
