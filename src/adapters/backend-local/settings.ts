/**
 * The local backend's settings from the daemon's environment, parsed with the others at start
 * (apps/daemon/config.ts, through this backend's plugin): the knobs every local profile gets, the profiles file's path and where job
 * cgroups go. The backend receives them typed (adapters/backend-local/profiles.ts) and reads
 * no variable itself. A bad value stops the start naming its variable; an empty one is unset.
 */

import type { ProfileNetwork, ProfileRunAs } from "../../core/models.ts";
import {
  mountProblem,
  overlappingTargets,
  type ProfileMount,
  parseMountList,
} from "../../core/mounts.ts";
import { CGROUP_ROOT_ENV } from "./limit-enforcement.ts";
import type { LocalKnobs } from "./profiles.ts";

export { CGROUP_ROOT_ENV };
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

export interface LocalSettings {
  readonly knobs: LocalKnobs;
  /** `OPENAI4S_LOCAL_PROFILES`: the profiles file, as written (checked when it is read). */
  readonly profilesFile: string | null;
  /** `OPENAI4S_CGROUP_ROOT`, as written: `off`, or a path inside the hierarchy. */
  readonly cgroupRoot: string | null;
}

export type LocalSettingsResult =
  | { readonly kind: "Parsed"; readonly local: LocalSettings }
  | {
      readonly kind: "Invalid";
      readonly errors: readonly { readonly variable: string; readonly message: string }[];
    };

type Env = Readonly<Record<string, string | undefined>>;
type Knob<T> =
  | { readonly kind: "Unset" }
  | { readonly kind: "Set"; readonly value: T }
  | { readonly kind: "Bad"; readonly variable: string; readonly message: string };

function text(env: Env, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw === "" ? undefined : raw;
}

/** Digits only: "5m" or "1.5" read three ways by three people. */
function wholeNumber(env: Env, name: string, min: number, max: number, unit: string): Knob<number> {
  const raw = text(env, name);
  if (raw === undefined) return { kind: "Unset" };
  const n = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : Number.NaN;
  if (n >= min && n <= max) return { kind: "Set", value: n };
  const message = `${name}=${JSON.stringify(raw)}: expected whole ${unit} from ${min} to ${max}`;
  return { kind: "Bad", variable: name, message };
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[]): Knob<T> {
  const raw = text(env, name);
  if (raw === undefined) return { kind: "Unset" };
  if ((allowed as readonly string[]).includes(raw)) return { kind: "Set", value: raw as T };
  const message = `${name}=${JSON.stringify(raw)}: expected ${allowed.join(" or ")}`;
  return { kind: "Bad", variable: name, message };
}

function mounts(env: Env, runsAsOwner: boolean): Knob<readonly ProfileMount[]> {
  const raw = text(env, MOUNTS_ENV);
  if (raw === undefined) return { kind: "Unset" };
  const bad = (message: string) => ({ kind: "Bad" as const, variable: MOUNTS_ENV, message });
  const parsed = parseMountList(raw);
  if ("error" in parsed) return bad(`${MOUNTS_ENV}: ${parsed.error}`);
  for (const m of parsed) {
    const problem = mountProblem(m, runsAsOwner, `${MOUNTS_ENV} entry ${m.source}:${m.target}`);
    if (problem !== null) return bad(problem);
  }
  const overlap = overlappingTargets(parsed);
  if (overlap !== null) return bad(`${MOUNTS_ENV}: ${overlap}`);
  return { kind: "Set", value: parsed };
}

/** Every local variable, each checked whether or not this daemon runs the local backend. */
export function parseLocalSettings(env: Env): LocalSettingsResult {
  const warn = wholeNumber(env, WARN_MINUTES_ENV, 0, MAX_WARN_MINUTES, "minutes");
  const memory = wholeNumber(env, MEMORY_MB_ENV, MIN_MEMORY_MB, 2 ** 40, "MiB");
  const pids = wholeNumber(env, PIDS_MAX_ENV, MIN_PIDS, MAX_PIDS, "processes");
  const net = oneOf<ProfileNetwork>(env, NETWORK_ENV, ["host", "none"]);
  const who = oneOf<ProfileRunAs>(env, RUN_AS_PROFILE_ENV, ["allocation", "owner"]);
  const bound = mounts(env, who.kind === "Set" && who.value === "owner");
  const errors = [warn, memory, pids, net, who, bound].flatMap((knob) =>
    knob.kind === "Bad" ? [{ variable: knob.variable, message: knob.message }] : [],
  );
  if (errors.length > 0) return { kind: "Invalid", errors };
  const set = <T, K extends string>(knob: Knob<T>, key: K) =>
    (knob.kind === "Set" ? { [key]: knob.value } : {}) as { readonly [P in K]?: T };
  return {
    kind: "Parsed",
    local: {
      knobs: {
        ...set(warn, "warnMinutes"),
        ...set(memory, "memoryMb"),
        ...set(pids, "pidsMax"),
        ...set(net, "network"),
        ...set(who, "runAs"),
        ...set(bound, "mounts"),
      },
      profilesFile: text(env, LOCAL_PROFILES_ENV) ?? null,
      cgroupRoot: text(env, CGROUP_ROOT_ENV) ?? null,
    },
  };
}
