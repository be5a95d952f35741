/**
 * `cluster.toml`: the one file that maps a profile name a scientist says (`gpu-interactive`)
 * onto the partition, QoS and account an administrator controls (D5).
 *
 * - `ClusterProfile.public()` is the view scientists and the API see, and deliberately omits
 *   partition, QoS and account: a queue name in a JSON body is the same leak by a slower
 *   route. `toJSON()` returns the same view, so serialising a profile by accident cannot
 *   leak either.
 * - The file is read in a strict TOML subset (lib/toml/subset.ts), cross-checked by two readers.
 * - Unknown keys are refused by name with their line instead of ignored: a misspelt `qos`
 *   that is silently dropped sends every job to the default queue.
 * - Every profile is also put through the submission boundary's own validation (the broker's
 *   sbatch argv builder) at load time, so a profile the loader accepts is one the broker will
 *   submit, never a refusal discovered when a scientist's job is queued.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { readEnvironments } from "../../core/environments.ts";
import type { ProfileEnvironment, ResourceProfile, WorkloadKind } from "../../core/models.ts";
import type { ProfileMount } from "../../core/mounts.ts";
import { readTomlSubset } from "../../lib/toml/cross-check.ts";
import {
  joinKey,
  type TomlNode,
  type TomlRefusal,
  type TomlScalar,
  type TomlTableNode,
} from "../../lib/toml/subset.ts";
import type { PlacementCatalog, SlurmPlacement } from "./backend.ts";
import { type ClusterProfile, createClusterProfile } from "./cluster-profile.ts";
import { maximaOf, maximaProblems } from "./profile-maxima.ts";
import { resourceOptions } from "./profiles-argv.ts";
import {
  bool,
  CLUSTER_KEYS,
  type Defaults,
  int,
  type MappedField,
  PROFILE_KEYS,
  PROFILE_NAME_PATTERN,
  type Problem,
  REQUIRED_PROFILE_KEYS,
  readKeys,
  readMounts,
  str,
  TOP_LEVEL,
} from "./profiles-schema.ts";

/** A cluster.toml is a page of text; anything larger is not one. */
export const MAX_CLUSTER_CONFIG_BYTES = 1024 * 1024;

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

export { type ClusterProfile, DEFAULT_MAX_ARRAY_SIZE } from "./cluster-profile.ts";

export { type ArgvBuild, probeArgv, resourceOptions } from "./profiles-argv.ts";

// ---------------------------------------------------------------------------------------------
// Profiles
// ---------------------------------------------------------------------------------------------

/** A profile's placement from its keys, the [cluster] defaults filling what it leaves out. */
function placementOf(
  values: ReadonlyMap<string, TomlScalar>,
  defaults: Defaults,
): { readonly placement: SlurmPlacement; readonly inherited: ReadonlySet<MappedField> } {
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
  const maxima = maximaOf(values);
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
    ...(maxima === null ? {} : { maxima }),
  };
  return { placement, inherited };
}

/** What scientists see of a profile: no partition, no QoS, no account. */
function publicViewOf(
  name: string,
  values: ReadonlyMap<string, TomlScalar>,
  kinds: readonly WorkloadKind[],
  placement: SlurmPlacement,
  mounts: readonly ProfileMount[],
  environments: readonly ProfileEnvironment[],
): ResourceProfile {
  const warnMinutes = int(values, "warn_minutes_before_limit");
  const maxOutputChars = int(values, "max_output_chars");
  return {
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
    ...(placement.maxima === undefined ? {} : { maxima: placement.maxima }),
    // The reconciler's TIME_LIMIT_NEAR event uses the same lead as the job's --signal.
    ...(warnMinutes === null ? {} : { warnBeforeLimitSeconds: warnMinutes * 60 }),
    ...((placement.maxTasks ?? 1) > 1 ? { maxTasks: placement.maxTasks } : {}),
    ...(str(values, "run_as") === "owner" ? { runAs: "owner" as const } : {}),
    ...(maxOutputChars === null ? {} : { maxOutputChars }),
    ...(mounts.length > 0 ? { mounts } : {}),
    ...(environments.length > 0 ? { environments } : {}),
  };
}

/** `[profiles.NAME.environments.ENV]`, by the rules both backends share (core/environments.ts). */
function profileEnvironments(
  name: string,
  node: TomlNode | undefined,
  problems: Problem[],
): readonly ProfileEnvironment[] {
  if (node === undefined) return [];
  const read = readEnvironments(name, node);
  if (read.kind === "Valid") return read.environments;
  problems.push({
    position: { line: read.line, column: 1 },
    key: joinKey(["profiles", name, "environments"]),
    message: read.message,
  });
  return [];
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
  // [profiles.NAME.environments.ENV] likewise, by the rules both backends share.
  const environmentsNode = node.entries.get("environments");
  const plain: TomlTableNode = {
    ...node,
    entries: new Map([...node.entries].filter(([k]) => k !== "mounts" && k !== "environments")),
  };
  const environments = profileEnvironments(name, environmentsNode, problems);
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
  maximaProblems(values, plain, path, problems);
  if (kinds.length === 0 && problems.length === before) {
    problems.push({
      position: node.position,
      key,
      message: `[${key}] allows no kind of work: set allow_batch = true and/or allow_sessions = true`,
    });
  }
  if (problems.length > before) return null;

  const { placement, inherited } = placementOf(values, defaults);
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
  const publicView = publicViewOf(name, values, kinds, placement, mounts, environments);
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
