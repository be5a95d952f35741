/**
 * The local backend's profiles as the daemon's environment configures them. The knobs apply
 * to every local profile (there is one, `default`), each the local counterpart of a cluster
 * profile's key; a value that is not what the knob expects stops the daemon, naming it:
 *  - OPENAI4S_WARN_MINUTES_BEFORE_LIMIT: how long before its time limit a job's history gets
 *    its TIME_LIMIT_NEAR event and its process group SIGURG (0 turns both off);
 *  - OPENAI4S_LOCAL_MEMORY_MB: the memory each allocation may use (its cgroup's limit; the
 *    default is three quarters of this machine's memory, so one job cannot take the host);
 *  - OPENAI4S_LOCAL_PIDS_MAX: the processes each allocation may hold at once (4,096);
 *  - OPENAI4S_LOCAL_NETWORK: `host` (default) or `none` (its own network namespace, loopback
 *    only; needs the sandbox).
 * With a profiles file (`serve --local-profiles FILE`, profiles-file.ts) the knobs are the
 * defaults of every profile in it that leaves the key out; `network` left out there is `none`
 * unless OPENAI4S_LOCAL_NETWORK is set.
 *  - OPENAI4S_LOCAL_RUN_AS: `allocation` (default: the daemon's choice, a uid per workload)
 *    or `owner` (a principal's job runs as the principal's unix account; a root daemon only);
 *  - OPENAI4S_LOCAL_MOUNTS: `SOURCE:TARGET:MODE,...` host directories bound into every job
 *    (MODE `ro` or `rw`; SOURCE may use `{user}` with OPENAI4S_LOCAL_RUN_AS=owner).
 * Those two apply to every profile, the file's included.
 */
import {
  DEFAULT_PIDS_MAX,
  type ProfileNetwork,
  type ProfileRunAs,
  type ResourceProfile,
} from "../../core/models.ts";
import {
  mountProblem,
  overlappingTargets,
  type ProfileMount,
  parseMountList,
} from "../../core/mounts.ts";
import { defaultLocalProfiles } from "./backend-options.ts";
import { localProfilesFromToml, type ProfilesTomlRead } from "./profiles-file.ts";

export const WARN_MINUTES_ENV = "OPENAI4S_WARN_MINUTES_BEFORE_LIMIT";
export const MEMORY_MB_ENV = "OPENAI4S_LOCAL_MEMORY_MB";
export const PIDS_MAX_ENV = "OPENAI4S_LOCAL_PIDS_MAX";
export const NETWORK_ENV = "OPENAI4S_LOCAL_NETWORK";
/** A file of `[profiles.NAME]` tables (profiles-file.ts), read by the composition root. */
export const LOCAL_PROFILES_ENV = "OPENAI4S_LOCAL_PROFILES";
export const RUN_AS_PROFILE_ENV = "OPENAI4S_LOCAL_RUN_AS";
export const MOUNTS_ENV = "OPENAI4S_LOCAL_MOUNTS";
/** The cluster profiles' own bound (about 18 hours, the scheduler signal's limit in minutes). */
const MAX_WARN_MINUTES = 1_092;
/** Below this a Python interpreter does not start; above pid_max it means nothing. */
const MIN_PIDS = 16;
const MAX_PIDS = 4_194_304;
const MIN_MEMORY_MB = 16;

export type LocalProfiles =
  | { readonly kind: "Valid"; readonly profiles: readonly ResourceProfile[] }
  | { readonly kind: "ConfigError"; readonly message: string };

type Knob<T> =
  | { readonly kind: "Unset" }
  | { readonly kind: "Set"; readonly value: T }
  | {
      readonly kind: "Bad";
      readonly message: string;
    };

/** Digits only: "5m" or "1.5" read three ways by three people. */
function wholeNumber(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  min: number,
  max: number,
  unit: string,
): Knob<number> {
  const raw = env[name];
  if (raw === undefined || raw === "") return { kind: "Unset" };
  const n = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : Number.NaN;
  if (n >= min && n <= max) return { kind: "Set", value: n };
  return {
    kind: "Bad",
    message: `${name}=${JSON.stringify(raw)}: expected whole ${unit} from ${min} to ${max}`,
  };
}

function network(env: Readonly<Record<string, string | undefined>>): Knob<ProfileNetwork> {
  const raw = env[NETWORK_ENV];
  if (raw === undefined || raw === "") return { kind: "Unset" };
  if (raw === "host" || raw === "none") return { kind: "Set", value: raw };
  return { kind: "Bad", message: `${NETWORK_ENV}=${JSON.stringify(raw)}: expected host or none` };
}

function runAs(env: Readonly<Record<string, string | undefined>>): Knob<ProfileRunAs> {
  const raw = env[RUN_AS_PROFILE_ENV];
  if (raw === undefined || raw === "") return { kind: "Unset" };
  if (raw === "allocation" || raw === "owner") return { kind: "Set", value: raw };
  return {
    kind: "Bad",
    message: `${RUN_AS_PROFILE_ENV}=${JSON.stringify(raw)}: expected allocation or owner`,
  };
}

function mounts(
  env: Readonly<Record<string, string | undefined>>,
  runsAsOwner: boolean,
): Knob<readonly ProfileMount[]> {
  const raw = env[MOUNTS_ENV];
  if (raw === undefined || raw === "") return { kind: "Unset" };
  const parsed = parseMountList(raw);
  if ("error" in parsed) return { kind: "Bad", message: `${MOUNTS_ENV}: ${parsed.error}` };
  for (const m of parsed) {
    const problem = mountProblem(m, runsAsOwner, `${MOUNTS_ENV} entry ${m.source}:${m.target}`);
    if (problem !== null) return { kind: "Bad", message: problem };
  }
  const overlap = overlappingTargets(parsed);
  if (overlap !== null) return { kind: "Bad", message: `${MOUNTS_ENV}: ${overlap}` };
  return { kind: "Set", value: parsed };
}

/**
 * The profiles: from the admin's file when there is one (profiles-file.ts; the knobs above
 * are then what a profile that leaves a key out gets), else the one built-in `default`.
 */
export function localProfiles(
  env: Readonly<Record<string, string | undefined>>,
  file: { readonly name: string; readonly read: ProfilesTomlRead } | null = null,
): LocalProfiles {
  const warn = wholeNumber(env, WARN_MINUTES_ENV, 0, MAX_WARN_MINUTES, "minutes");
  const memory = wholeNumber(env, MEMORY_MB_ENV, MIN_MEMORY_MB, 2 ** 40, "MiB");
  const pids = wholeNumber(env, PIDS_MAX_ENV, MIN_PIDS, MAX_PIDS, "processes");
  const net = network(env);
  const who = runAs(env);
  const bound = mounts(env, who.kind === "Set" && who.value === "owner");
  for (const knob of [warn, memory, pids, net, who, bound]) {
    if (knob.kind === "Bad") return { kind: "ConfigError", message: knob.message };
  }
  const identity = (p: ResourceProfile): ResourceProfile => ({
    ...p,
    ...(who.kind === "Set" ? { runAs: who.value } : {}),
    ...(bound.kind === "Set" ? { mounts: bound.value } : {}),
  });
  const [builtIn] = defaultLocalProfiles();
  if (builtIn === undefined) throw new Error("no built-in local profile");
  if (file !== null) {
    const read = localProfilesFromToml(file.name, file.read, {
      memoryMb: memory.kind === "Set" ? memory.value : (builtIn.resources.memoryMb ?? 1024),
      pidsMax: pids.kind === "Set" ? pids.value : DEFAULT_PIDS_MAX,
      network: net.kind === "Set" ? net.value : null,
      warnBeforeLimitSeconds: warn.kind === "Set" ? warn.value * 60 : null,
    });
    return read.kind === "Valid" ? { kind: "Valid", profiles: read.profiles.map(identity) } : read;
  }
  const profiles = defaultLocalProfiles()
    .map(
      (p): ResourceProfile => ({
        ...p,
        resources: {
          ...p.resources,
          memoryMb: memory.kind === "Set" ? memory.value : p.resources.memoryMb,
        },
        pidsMax: pids.kind === "Set" ? pids.value : (p.pidsMax ?? DEFAULT_PIDS_MAX),
        network: net.kind === "Set" ? net.value : (p.network ?? "host"),
        ...(warn.kind === "Set" ? { warnBeforeLimitSeconds: warn.value * 60 } : {}),
      }),
    )
    .map(identity);
  return { kind: "Valid", profiles };
}
