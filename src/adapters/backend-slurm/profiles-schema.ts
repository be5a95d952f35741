/**
 * cluster.toml's schema: the keys each table may hold, their types and checks (the ranges are
 * the broker's own), the mounts tables, and the reading of one table's keys against them.
 */
import { mountProblem, overlappingTargets, type ProfileMount } from "../../core/mounts.ts";
import {
  joinKey,
  type TomlNode,
  type TomlPosition,
  type TomlScalar,
  type TomlTableNode,
} from "../../lib/toml/subset.ts";
import { SCHEDULER_NAME_PATTERN } from "./broker-validation.ts";

export const PROFILE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_DESCRIPTION_CHARS = 200;

export type KeyType = "string" | "integer" | "boolean";

export interface KeySpec {
  readonly type: KeyType;
  /** A reason the value is not acceptable, or null. */
  readonly check?: (value: TomlScalar) => string | null;
}

export function schedulerName(value: TomlScalar): string | null {
  return SCHEDULER_NAME_PATTERN.test(String(value))
    ? null
    : `must match ${SCHEDULER_NAME_PATTERN.source} (letters, digits, . _ -; no commas, spaces or colons)`;
}

export function range(min: number, max: number): (value: TomlScalar) => string | null {
  return (value) =>
    typeof value === "number" && value >= min && value <= max
      ? null
      : `must be an integer in ${min}..${max}`;
}

export function description(value: TomlScalar): string | null {
  const text = String(value);
  if (text.trim() === "") return "must not be empty";
  if (text.length > MAX_DESCRIPTION_CHARS)
    return `must be at most ${MAX_DESCRIPTION_CHARS} characters`;
  // Printed one per line by `check-config` and `openai4s profiles`.
  if (/[\u0000-\u001f\u007f]/.test(text)) return "must be one line without control characters";
  return null;
}

export function mpiPlugin(value: TomlScalar): string | null {
  return /^[a-z][a-z0-9_]{0,31}$/.test(String(value))
    ? null
    : "must name an MPI plugin as the cluster lists it with --mpi=list (e.g. pmi2, pmix)";
}

export function runAsMode(value: TomlScalar): string | null {
  return value === "allocation" || value === "owner" ? null : 'must be "allocation" or "owner"';
}

export const MOUNT_KEYS: Readonly<Record<string, KeySpec>> = {
  source: { type: "string" },
  target: { type: "string" },
  mode: {
    type: "string",
    check: (v) => (v === "ro" || v === "rw" ? null : 'must be "ro" or "rw"'),
  },
};

/** `[profiles.NAME.mounts.LABEL]` tables: source, target and mode, each required. */
export function readMounts(
  node: TomlNode,
  path: readonly string[],
  runsAsOwner: boolean,
  problems: Problem[],
): readonly ProfileMount[] {
  const where = `[${joinKey(path)}]`;
  if (node.kind !== "table") {
    problems.push({
      position: node.position,
      key: joinKey(path),
      message: `${joinKey(path)} must be tables: write ${where.slice(0, -1)}.LABEL] and source, target and mode under it`,
    });
    return [];
  }
  const mounts: ProfileMount[] = [];
  for (const [label, entry] of node.entries) {
    const at = [...path, label];
    if (entry.kind !== "table") {
      problems.push({
        position: entry.position,
        key: joinKey(at),
        message: `${joinKey(at)} must be a table: write [${joinKey(at)}] and source, target and mode under it`,
      });
      continue;
    }
    const before = problems.length;
    const values = readKeys(entry, at, MOUNT_KEYS, problems);
    for (const required of ["source", "target", "mode"]) {
      if (!entry.entries.has(required)) {
        problems.push({
          position: entry.position,
          key: joinKey([...at, required]),
          message: `[${joinKey(at)}] has no ${required}`,
        });
      }
    }
    if (problems.length > before) continue;
    const mount: ProfileMount = {
      source: str(values, "source") ?? "",
      target: str(values, "target") ?? "",
      mode: str(values, "mode") === "rw" ? "rw" : "ro",
    };
    const problem = mountProblem(mount, runsAsOwner, `[${joinKey(at)}]`);
    if (problem !== null) {
      problems.push({ position: entry.position, key: joinKey(at), message: problem });
      continue;
    }
    mounts.push(mount);
  }
  const overlap = overlappingTargets(mounts);
  if (overlap !== null) {
    problems.push({ position: node.position, key: joinKey(path), message: `${where}: ${overlap}` });
  }
  return mounts;
}

/** Defaults for every profile. */
export const CLUSTER_KEYS: Readonly<Record<string, KeySpec>> = {
  partition: { type: "string", check: schedulerName },
  qos: { type: "string", check: schedulerName },
  account: { type: "string", check: schedulerName },
};

// The ranges are the broker's own (sbatchArgv), so the two can never disagree about a count.
export const PROFILE_KEYS: Readonly<Record<string, KeySpec>> = {
  description: { type: "string", check: description },
  partition: { type: "string", check: schedulerName },
  qos: { type: "string", check: schedulerName },
  account: { type: "string", check: schedulerName },
  nodes: { type: "integer", check: range(1, 100_000) },
  cpus: { type: "integer", check: range(1, 1_000_000) },
  gpus: { type: "integer", check: range(0, 1_000) },
  memory_mb: { type: "integer", check: range(1, 2 ** 30) },
  time_limit_minutes: { type: "integer", check: range(1, 100_000_000) },
  // How far a submission may raise the four above (`resources`, `timeLimitSeconds`); absent:
  // the default is also the maximum. Each at least its default, the same ranges as them.
  max_cpus: { type: "integer", check: range(1, 1_000_000) },
  max_gpus: { type: "integer", check: range(0, 1_000) },
  max_memory_mb: { type: "integer", check: range(1, 2 ** 30) },
  max_time_limit_minutes: { type: "integer", check: range(1, 100_000_000) },
  // Minutes before the time limit a job is warned (SIGURG); 0 turns the warning off.
  warn_minutes_before_limit: { type: "integer", check: range(0, 1_092) },
  allow_batch: { type: "boolean" },
  allow_sessions: { type: "boolean" },
  // The most tasks (MPI ranks) one BATCH workload may ask for; absent: 1 (one command).
  max_tasks: { type: "integer", check: range(1, 1_000_000) },
  // A session cell's output sent per stream; past it the whole output goes to a file.
  max_output_chars: { type: "integer", check: range(1_000, 100_000_000) },
  // srun's --mpi for those tasks (pmi2, pmix, ...); absent: the cluster's MpiDefault.
  mpi: { type: "string", check: mpiPlugin },
  // Who jobs run as: "allocation" (the daemon's choice) or "owner" (the principal's account).
  run_as: { type: "string", check: runAsMode },
};

export const REQUIRED_PROFILE_KEYS = ["description"] as const;

export const TOP_LEVEL = ["cluster", "profiles"] as const;

export interface Problem {
  readonly position: TomlPosition;
  readonly key: string | null;
  readonly message: string;
}

export function typeOf(node: TomlNode): string {
  if (node.kind === "table") return "a table";
  switch (typeof node.value) {
    case "string":
      return "a string";
    case "number":
      return "an integer";
    case "boolean":
      return "a boolean";
    default:
      return "something else";
  }
}

export function hasType(value: TomlScalar, type: KeyType): boolean {
  switch (type) {
    case "string":
      return typeof value === "string";
    case "integer":
      return typeof value === "number";
    case "boolean":
      return typeof value === "boolean";
    default: {
      const never: never = type;
      throw new Error(`unhandled key type ${String(never)}`);
    }
  }
}

export function article(type: KeyType): string {
  return type === "integer" ? "an integer" : `a ${type}`;
}

/**
 * The scalar keys of one table, checked against a schema. Unknown keys and wrong types are
 * problems; valid values are returned by name.
 */
export function readKeys(
  table: TomlTableNode,
  path: readonly string[],
  schema: Readonly<Record<string, KeySpec>>,
  problems: Problem[],
): Map<string, TomlScalar> {
  const values = new Map<string, TomlScalar>();
  const where = `[${joinKey(path)}]`;
  for (const [key, node] of table.entries) {
    const full = joinKey([...path, key]);
    const spec = Object.hasOwn(schema, key) ? schema[key] : undefined;
    if (spec === undefined) {
      problems.push({
        position: node.position,
        key: full,
        message:
          node.kind === "table"
            ? `unknown table [${full}]: ${where} takes no sub-tables`
            : `unknown key ${JSON.stringify(key)} in ${where} (known keys: ${Object.keys(schema).join(", ")})`,
      });
      continue;
    }
    if (node.kind === "table" || !hasType(node.value, spec.type)) {
      problems.push({
        position: node.position,
        key: full,
        message: `${full} must be ${article(spec.type)}, not ${typeOf(node)}`,
      });
      continue;
    }
    const reason = spec.check?.(node.value) ?? null;
    if (reason !== null) {
      problems.push({ position: node.position, key: full, message: `${full} ${reason}` });
      continue;
    }
    values.set(key, node.value);
  }
  return values;
}

export function str(values: ReadonlyMap<string, TomlScalar>, key: string): string | null {
  const v = values.get(key);
  return typeof v === "string" ? v : null;
}

export function int(values: ReadonlyMap<string, TomlScalar>, key: string): number | null {
  const v = values.get(key);
  return typeof v === "number" ? v : null;
}

export function bool(values: ReadonlyMap<string, TomlScalar>, key: string): boolean {
  return values.get(key) === true;
}

export type MappedField = "partition" | "qos" | "account";

export interface Defaults {
  readonly partition: string | null;
  readonly qos: string | null;
  readonly account: string | null;
}
