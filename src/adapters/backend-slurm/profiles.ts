/**
 * `cluster.toml`: the one file that maps a profile name a scientist says (`gpu-interactive`)
 * onto the partition, QoS and account an administrator controls (D5).
 *
 * - `ClusterProfile.public()` is the view scientists and the API see, and deliberately omits
 *   partition, QoS and account: a queue name in a JSON body is the same leak by a slower
 *   route. `toJSON()` returns the same view, so serialising a profile by accident cannot
 *   leak either.
 * - The file is read in a strict TOML subset (toml-subset.ts), cross-checked by two readers.
 * - Unknown keys are refused by name with their line instead of ignored: a misspelt `qos`
 *   that is silently dropped sends every job to the default queue.
 * - Every profile is also put through the submission boundary's own validation (the broker's
 *   sbatch argv builder) at load time, so a profile the loader accepts is one the broker will
 *   submit, never a refusal discovered when a scientist's job is queued.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import type { ResourceProfile, WorkloadKind } from "../../core/models.ts";
import { mountProblem, overlappingTargets, type ProfileMount } from "../../core/mounts.ts";
import type { PlacementCatalog, SlurmPlacement } from "./backend.ts";
import { type BatchSpec, sbatchArgv } from "./broker-argv.ts";
import { SCHEDULER_NAME_PATTERN } from "./broker-validation.ts";
import { readTomlSubset } from "./toml-cross-check.ts";
import {
  joinKey,
  type TomlNode,
  type TomlPosition,
  type TomlRefusal,
  type TomlScalar,
  type TomlTableNode,
} from "./toml-subset.ts";

const PROFILE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_DESCRIPTION_CHARS = 200;
/** A cluster.toml is a page of text; anything larger is not one. */
export const MAX_CLUSTER_CONFIG_BYTES = 1024 * 1024;

export interface ClusterProfile {
  readonly name: string;
  /** The line of its [profiles.NAME] header. */
  readonly line: number;
  /** The administrator's side: where work on this profile is placed. */
  readonly placement: SlurmPlacement;
  /** What scientists see: no partition, no QoS, no account. */
  public(): ResourceProfile;
  /** Where it lands, in words, for `check-config` (one string per output line). */
  describeMapping(): readonly string[];
  /** Serialising a profile yields the public view, never the mapping. */
  toJSON(): ResourceProfile;
}

export type ClusterConfigLoad =
  | {
      readonly kind: "Loaded";
      readonly profiles: readonly ClusterProfile[];
      readonly catalog: PlacementCatalog;
    }
  /** The first problem in the file, by position; the message names the offending key. */
  | TomlRefusal
  /** The file could not be read at all (missing, unreadable, too large). */
  | { readonly kind: "Unreadable"; readonly message: string };

type Refused = TomlRefusal;

// ---------------------------------------------------------------------------------------------
// The schema
// ---------------------------------------------------------------------------------------------

type KeyType = "string" | "integer" | "boolean";

interface KeySpec {
  readonly type: KeyType;
  /** A reason the value is not acceptable, or null. */
  readonly check?: (value: TomlScalar) => string | null;
}

function schedulerName(value: TomlScalar): string | null {
  return SCHEDULER_NAME_PATTERN.test(String(value))
    ? null
    : `must match ${SCHEDULER_NAME_PATTERN.source} (letters, digits, . _ -; no commas, spaces or colons)`;
}

function range(min: number, max: number): (value: TomlScalar) => string | null {
  return (value) =>
    typeof value === "number" && value >= min && value <= max
      ? null
      : `must be an integer in ${min}..${max}`;
}

function description(value: TomlScalar): string | null {
  const text = String(value);
  if (text.trim() === "") return "must not be empty";
  if (text.length > MAX_DESCRIPTION_CHARS)
    return `must be at most ${MAX_DESCRIPTION_CHARS} characters`;
  // Printed one per line by `check-config` and `openai4s profiles`.
  if (/[\u0000-\u001f\u007f]/.test(text)) return "must be one line without control characters";
  return null;
}

function mpiPlugin(value: TomlScalar): string | null {
  return /^[a-z][a-z0-9_]{0,31}$/.test(String(value))
    ? null
    : "must name an MPI plugin as the cluster lists it with --mpi=list (e.g. pmi2, pmix)";
}

function runAsMode(value: TomlScalar): string | null {
  return value === "allocation" || value === "owner" ? null : 'must be "allocation" or "owner"';
}

const MOUNT_KEYS: Readonly<Record<string, KeySpec>> = {
  source: { type: "string" },
  target: { type: "string" },
  mode: {
    type: "string",
    check: (v) => (v === "ro" || v === "rw" ? null : 'must be "ro" or "rw"'),
  },
};

/** `[profiles.NAME.mounts.LABEL]` tables: source, target and mode, each required. */
function readMounts(
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
const CLUSTER_KEYS: Readonly<Record<string, KeySpec>> = {
  partition: { type: "string", check: schedulerName },
  qos: { type: "string", check: schedulerName },
  account: { type: "string", check: schedulerName },
};

// The ranges are the broker's own (sbatchArgv), so the two can never disagree about a count.
const PROFILE_KEYS: Readonly<Record<string, KeySpec>> = {
  description: { type: "string", check: description },
  partition: { type: "string", check: schedulerName },
  qos: { type: "string", check: schedulerName },
  account: { type: "string", check: schedulerName },
  nodes: { type: "integer", check: range(1, 100_000) },
  cpus: { type: "integer", check: range(1, 1_000_000) },
  gpus: { type: "integer", check: range(0, 1_000) },
  memory_mb: { type: "integer", check: range(1, 2 ** 30) },
  time_limit_minutes: { type: "integer", check: range(1, 100_000_000) },
  // Minutes before the time limit a job is warned (SIGURG); 0 turns the warning off.
  warn_minutes_before_limit: { type: "integer", check: range(0, 1_092) },
  allow_batch: { type: "boolean" },
  allow_sessions: { type: "boolean" },
  // The most tasks (MPI ranks) one BATCH workload may ask for; absent: 1 (one command).
  max_tasks: { type: "integer", check: range(1, 1_000_000) },
  // srun's --mpi for those tasks (pmi2, pmix, ...); absent: the cluster's MpiDefault.
  mpi: { type: "string", check: mpiPlugin },
  // Who jobs run as: "allocation" (the daemon's choice) or "owner" (the principal's account).
  run_as: { type: "string", check: runAsMode },
};

const REQUIRED_PROFILE_KEYS = ["description"] as const;

const TOP_LEVEL = ["cluster", "profiles"] as const;

interface Problem {
  readonly position: TomlPosition;
  readonly key: string | null;
  readonly message: string;
}

function typeOf(node: TomlNode): string {
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

function hasType(value: TomlScalar, type: KeyType): boolean {
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

function article(type: KeyType): string {
  return type === "integer" ? "an integer" : `a ${type}`;
}

/**
 * The scalar keys of one table, checked against a schema. Unknown keys and wrong types are
 * problems; valid values are returned by name.
 */
function readKeys(
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

function str(values: ReadonlyMap<string, TomlScalar>, key: string): string | null {
  const v = values.get(key);
  return typeof v === "string" ? v : null;
}

function int(values: ReadonlyMap<string, TomlScalar>, key: string): number | null {
  const v = values.get(key);
  return typeof v === "number" ? v : null;
}

function bool(values: ReadonlyMap<string, TomlScalar>, key: string): boolean {
  return values.get(key) === true;
}

type MappedField = "partition" | "qos" | "account";

interface Defaults {
  readonly partition: string | null;
  readonly qos: string | null;
  readonly account: string | null;
}

// ---------------------------------------------------------------------------------------------
// Profiles
// ---------------------------------------------------------------------------------------------

/** The placement as the broker will submit it, with bookkeeping values that always pass. */
function probeSpec(placement: SlurmPlacement): BatchSpec {
  return {
    jobName: "o4s-preflight",
    comment: "o4s-preflight",
    scriptPath: "/dev/null",
    workDir: "/",
    stdoutPath: "/dev/null",
    stderrPath: "/dev/null",
    partition: placement.partition,
    qos: placement.qos,
    account: placement.account,
    nodes: placement.nodes,
    cpusPerTask: placement.cpus,
    gpusPerNode: placement.gpus,
    memoryMb: placement.memoryMb,
    timeLimitMinutes:
      placement.timeLimitSeconds === null
        ? null
        : Math.max(1, Math.ceil(placement.timeLimitSeconds / 60)),
    env: {},
  };
}

/** Options that say nothing about where or on what a job runs. */
const BOOKKEEPING_OPTIONS = [
  "--parsable",
  "--job-name=",
  "--comment=",
  "--chdir=",
  "--output=",
  "--error=",
  "--export=",
  "--no-requeue",
];

export type ArgvBuild =
  | { readonly kind: "Valid"; readonly argv: readonly string[] }
  | { readonly kind: "Invalid"; readonly message: string };

/**
 * The sbatch argv (without the script) a job on this placement is submitted with: built by
 * the broker itself, so check-config shows and preflight tests the real request rather than
 * a second rendering of it.
 */
export function probeArgv(placement: SlurmPlacement): ArgvBuild {
  const spec = probeSpec(placement);
  const built = sbatchArgv(spec);
  if (built.kind === "Invalid") return built;
  const argv = built.argv;
  if (argv[argv.length - 1] !== spec.scriptPath) {
    throw new Error("sbatchArgv no longer ends with the script path: update probeArgv");
  }
  return { kind: "Valid", argv: argv.slice(0, -1) };
}

/** probeArgv minus bookkeeping: only what says where and on what the job runs. */
export function resourceOptions(placement: SlurmPlacement): ArgvBuild {
  const built = probeArgv(placement);
  if (built.kind === "Invalid") return built;
  const bookkeeping = (arg: string) =>
    BOOKKEEPING_OPTIONS.some((b) => arg === b || (b.endsWith("=") && arg.startsWith(b)));
  return { kind: "Valid", argv: built.argv.filter((arg) => !bookkeeping(arg)) };
}

/**
 * The most elements one array may have: Slurm's default MaxArraySize (1001, indices 0..1000),
 * which a site may raise but rarely lowers. A larger array is refused at admission, naming
 * `array`, rather than by sbatch after a round trip.
 */
export const DEFAULT_MAX_ARRAY_SIZE = 1001;

function createClusterProfile(
  name: string,
  line: number,
  publicView: ResourceProfile,
  placement: SlurmPlacement,
  inherited: ReadonlySet<MappedField>,
): ClusterProfile {
  const frozenPublic: ResourceProfile = Object.freeze({
    ...publicView,
    ...(publicView.kinds.includes("BATCH") ? { maxArraySize: DEFAULT_MAX_ARRAY_SIZE } : {}),
    kinds: Object.freeze([...publicView.kinds]),
    resources: Object.freeze({ ...publicView.resources }),
  });
  const from = (field: MappedField) => (inherited.has(field) ? " (from [cluster])" : "");
  return Object.freeze({
    name,
    line,
    placement: Object.freeze({ ...placement }),
    public: () => frozenPublic,
    toJSON: () => frozenPublic,
    describeMapping(): readonly string[] {
      const where = [
        placement.partition === null
          ? "the cluster's default partition"
          : `partition ${placement.partition}${from("partition")}`,
        placement.qos === null
          ? "no QoS given (the default)"
          : `QoS ${placement.qos}${from("qos")}`,
        placement.account === null
          ? "the submitter's default account"
          : `account ${placement.account}${from("account")}`,
      ].join(", ");
      const options = resourceOptions(placement);
      return [
        where,
        options.kind === "Valid"
          ? `sbatch ${options.argv.join(" ")}`
          : `invalid: ${options.message}`,
        // The admin's eyes only: who jobs run as and what is bound in, sources included.
        ...(publicView.runAs === "owner"
          ? ["runs as the owning principal's unix account (submitted with --uid/--gid)"]
          : []),
        ...(publicView.mounts ?? []).map((m) => `mount ${m.source} at ${m.target} (${m.mode})`),
      ];
    },
  });
}

function readProfile(
  name: string,
  node: TomlNode,
  defaults: Defaults,
  problems: Problem[],
): ClusterProfile | null {
  const path = ["profiles", name];
  const key = joinKey(path);
  if (node.kind !== "table") {
    problems.push({
      position: node.position,
      key,
      message: `${key} must be a table: write [${key}] and its keys under it`,
    });
    return null;
  }
  if (!PROFILE_NAME_PATTERN.test(name)) {
    problems.push({
      position: node.position,
      key,
      message: `profile name ${JSON.stringify(name)} must match ${PROFILE_NAME_PATTERN.source}`,
    });
    return null;
  }
  const before = problems.length;
  // [profiles.NAME.mounts.LABEL] tables are read on their own; every other key as before.
  const mountsNode = node.entries.get("mounts");
  const plain: TomlTableNode = {
    ...node,
    entries: new Map([...node.entries].filter(([k]) => k !== "mounts")),
  };
  const values = readKeys(plain, path, PROFILE_KEYS, problems);
  const mounts =
    mountsNode === undefined
      ? []
      : readMounts(mountsNode, [...path, "mounts"], values.get("run_as") === "owner", problems);
  for (const required of REQUIRED_PROFILE_KEYS) {
    if (!node.entries.has(required)) {
      problems.push({
        position: node.position,
        key: joinKey([...path, required]),
        message: `[${key}] has no ${required}`,
      });
    }
  }
  const kinds: WorkloadKind[] = [];
  if (bool(values, "allow_sessions")) kinds.push("SESSION");
  if (bool(values, "allow_batch")) kinds.push("BATCH");
  if (kinds.length === 0 && problems.length === before) {
    problems.push({
      position: node.position,
      key,
      message: `[${key}] allows no kind of work: set allow_batch = true and/or allow_sessions = true`,
    });
  }
  if (problems.length > before) return null;

  const inherited = new Set<MappedField>();
  const mapped = (field: MappedField): string | null => {
    const own = str(values, field);
    if (own !== null) return own;
    if (defaults[field] !== null) inherited.add(field);
    return defaults[field];
  };
  const minutes = int(values, "time_limit_minutes");
  const warnMinutes = int(values, "warn_minutes_before_limit");
  const maxTasks = int(values, "max_tasks");
  const mpi = str(values, "mpi");
  const placement: SlurmPlacement = {
    partition: mapped("partition"),
    qos: mapped("qos"),
    account: mapped("account"),
    nodes: int(values, "nodes") ?? 1,
    cpus: int(values, "cpus") ?? 1,
    gpus: int(values, "gpus") ?? 0,
    memoryMb: int(values, "memory_mb"),
    timeLimitSeconds: minutes === null ? null : minutes * 60,
    ...(warnMinutes === null ? {} : { warnBeforeLimitSeconds: warnMinutes * 60 }),
    // Only when set: a profile without them is the one-task placement it always was.
    ...(maxTasks === null ? {} : { maxTasks }),
    ...(mpi === null ? {} : { mpi }),
  };
  // The broker is the last word on what can be submitted: ask it now, not at queue time.
  const options = resourceOptions(placement);
  if (options.kind === "Invalid") {
    problems.push({
      position: node.position,
      key,
      message: `[${key}] would be refused at submission: ${options.message}`,
    });
    return null;
  }
  const publicView: ResourceProfile = {
    name,
    description: str(values, "description") ?? "",
    kinds,
    resources: {
      nodes: placement.nodes,
      cpus: placement.cpus,
      gpus: placement.gpus,
      memoryMb: placement.memoryMb,
      timeLimitSeconds: placement.timeLimitSeconds,
    },
    // The reconciler's TIME_LIMIT_NEAR event uses the same lead as the job's --signal.
    ...(warnMinutes === null ? {} : { warnBeforeLimitSeconds: warnMinutes * 60 }),
    ...((placement.maxTasks ?? 1) > 1 ? { maxTasks: placement.maxTasks } : {}),
    ...(str(values, "run_as") === "owner" ? { runAs: "owner" as const } : {}),
    ...(mounts.length > 0 ? { mounts } : {}),
  };
  return createClusterProfile(name, node.position.line, publicView, placement, inherited);
}

function placementCatalog(profiles: readonly ClusterProfile[]): PlacementCatalog {
  const byName = new Map(profiles.map((p) => [p.name, p] as const));
  const publicViews = Object.freeze(profiles.map((p) => p.public()));
  return {
    profiles: () => publicViews,
    placement: (name) => byName.get(name)?.placement ?? null,
  };
}

function firstProblem(problems: readonly Problem[]): Problem | undefined {
  return [...problems].sort(
    (a, b) => a.position.line - b.position.line || a.position.column - b.position.column,
  )[0];
}

function refusedBy(problem: Problem): Refused {
  return {
    kind: "Refused",
    line: problem.position.line,
    column: problem.position.column,
    key: problem.key,
    message: problem.message,
  };
}

/** Reads cluster.toml text. The first problem by position wins, so fixes go top to bottom. */
export function parseClusterConfig(text: string): ClusterConfigLoad {
  const read = readTomlSubset(text);
  if (read.kind === "Refused") return read;
  const problems: Problem[] = [];
  const root = read.root;
  let defaults: Defaults = { partition: null, qos: null, account: null };

  for (const [key, node] of root.entries) {
    if ((TOP_LEVEL as readonly string[]).includes(key) && node.kind !== "table") {
      problems.push({
        position: node.position,
        key,
        message: `${key} must be a table: write [${key}]`,
      });
    } else if (!(TOP_LEVEL as readonly string[]).includes(key)) {
      problems.push({
        position: node.position,
        key: joinKey([key]),
        message: `unknown ${node.kind === "table" ? "table" : "key"} ${JSON.stringify(key)} (the file has [cluster] and [profiles.NAME] tables)`,
      });
    }
  }
  const cluster = root.entries.get("cluster");
  if (cluster?.kind === "table") {
    const values = readKeys(cluster, ["cluster"], CLUSTER_KEYS, problems);
    defaults = {
      partition: str(values, "partition"),
      qos: str(values, "qos"),
      account: str(values, "account"),
    };
  }
  const profiles: ClusterProfile[] = [];
  const profileTable = root.entries.get("profiles");
  if (profileTable?.kind === "table") {
    for (const [name, node] of profileTable.entries) {
      const profile = readProfile(name, node, defaults, problems);
      if (profile !== null) profiles.push(profile);
    }
  }
  const first = firstProblem(problems);
  if (first !== undefined) return refusedBy(first);
  if (profiles.length === 0) {
    return {
      kind: "Refused",
      line: profileTable?.position.line ?? 1,
      column: null,
      key: "profiles",
      message: "no profile is defined: add a [profiles.NAME] table",
    };
  }
  return { kind: "Loaded", profiles, catalog: placementCatalog(profiles) };
}

/** The line (1-based) holding the first byte that is not UTF-8, or null when all are. */
function firstNonUtf8Line(bytes: Uint8Array): number | null {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let line = 1;
  let start = 0;
  for (let i = 0; i <= bytes.length; i += 1) {
    if (i === bytes.length || bytes[i] === 0x0a) {
      try {
        decoder.decode(bytes.subarray(start, i));
      } catch {
        return line;
      }
      line += 1;
      start = i + 1;
    }
  }
  return null;
}

export type ClusterConfigSource = { readonly path: string } | { readonly text: string };

/**
 * The file's bytes, or null past `limit`. The size check above only holds for regular files:
 * a device or pipe (`/dev/zero`, `<(generate-config)`) reports size 0, and reading it whole
 * ran for 50 s and several GB before failing.
 */
function readAtMost(path: string, limit: number): Uint8Array | null {
  const fd = openSync(path, "r");
  try {
    const buffer = Buffer.alloc(limit + 1);
    let length = 0;
    for (;;) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) return buffer.subarray(0, length);
      length += n;
      if (length > limit) return null;
    }
  } finally {
    closeSync(fd);
  }
}

export function loadClusterConfig(source: ClusterConfigSource): ClusterConfigLoad {
  if ("text" in source) return parseClusterConfig(source.text);
  let bytes: Uint8Array;
  try {
    const size = statSync(source.path).size;
    if (size > MAX_CLUSTER_CONFIG_BYTES) {
      return {
        kind: "Unreadable",
        message: `${size} bytes is too large for a cluster configuration (at most ${MAX_CLUSTER_CONFIG_BYTES})`,
      };
    }
    const read = readAtMost(source.path, MAX_CLUSTER_CONFIG_BYTES);
    if (read === null) {
      return {
        kind: "Unreadable",
        message: `more than ${MAX_CLUSTER_CONFIG_BYTES} bytes is too large for a cluster configuration`,
      };
    }
    bytes = read;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return {
      kind: "Unreadable",
      message:
        typeof code === "string" ? `cannot read it (${code})` : `cannot read it: ${String(error)}`,
    };
  }
  const badLine = firstNonUtf8Line(bytes);
  if (badLine !== null) {
    return {
      kind: "Refused",
      line: badLine,
      column: null,
      key: null,
      message: "this line is not UTF-8 text",
    };
  }
  return parseClusterConfig(new TextDecoder("utf-8").decode(bytes));
}

/** `FILE:LINE:COLUMN: message` (column when known): the form editors jump to. */
export function formatRefusal(file: string, refused: Refused): string {
  const column = refused.column === null ? "" : `:${refused.column}`;
  return `${file}:${refused.line}${column}: ${refused.message}`;
}
