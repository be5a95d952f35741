/**
 * The local backend's profiles as the daemon's settings configure them. The knobs apply to
 * every local profile (there is one, `default`), each the local counterpart of a cluster
 * profile's key; the daemon reads and checks them from its environment at start
 * (apps/daemon/composition/local-settings.ts names the variables):
 *  - warnMinutes: how long before its time limit a job's history gets its TIME_LIMIT_NEAR
 *    event and its process group SIGURG (0 turns both off);
 *  - memoryMb: the memory each allocation may use (its cgroup's limit; the default is three
 *    quarters of this machine's memory, so one job cannot take the host);
 *  - pidsMax: the processes each allocation may hold at once (4,096);
 *  - network: `host` (default) or `none` (its own network namespace, loopback only; needs
 *    the sandbox).
 * With a profiles file (profiles-file.ts) the knobs are the defaults of every profile in it
 * that leaves the key out; `network` left out there is `none` unless the knob is set.
 *  - runAs: `allocation` (default: the daemon's choice, a uid per workload) or `owner` (a
 *    principal's job runs as the principal's unix account; a root daemon only);
 *  - mounts: host directories bound into every job.
 * Those two apply to every profile, the file's included.
 */
import {
  DEFAULT_PIDS_MAX,
  type ProfileNetwork,
  type ProfileRunAs,
  type ResourceProfile,
} from "../../core/models.ts";
import type { ProfileMount } from "../../core/mounts.ts";
import { defaultLocalProfiles } from "./backend-options.ts";
import { localProfilesFromToml, type ProfilesTomlRead } from "./profiles-file.ts";

/** The admin's knobs, already checked; absent: the built-in value. */
export interface LocalKnobs {
  readonly warnMinutes?: number;
  readonly memoryMb?: number;
  readonly pidsMax?: number;
  readonly network?: ProfileNetwork;
  readonly runAs?: ProfileRunAs;
  readonly mounts?: readonly ProfileMount[];
}

export type LocalProfiles =
  | { readonly kind: "Valid"; readonly profiles: readonly ResourceProfile[] }
  | { readonly kind: "ConfigError"; readonly message: string };

/**
 * The profiles: from the admin's file when there is one (profiles-file.ts; the knobs above
 * are then what a profile that leaves a key out gets), else the one built-in `default`.
 */
export function localProfiles(
  knobs: LocalKnobs,
  file: { readonly name: string; readonly read: ProfilesTomlRead } | null = null,
): LocalProfiles {
  const { warnMinutes, memoryMb, pidsMax, network } = knobs;
  const identity = (p: ResourceProfile): ResourceProfile => ({
    ...p,
    ...(knobs.runAs !== undefined ? { runAs: knobs.runAs } : {}),
    ...(knobs.mounts !== undefined ? { mounts: knobs.mounts } : {}),
  });
  const [builtIn] = defaultLocalProfiles();
  if (builtIn === undefined) throw new Error("no built-in local profile");
  if (file !== null) {
    const read = localProfilesFromToml(file.name, file.read, {
      memoryMb: memoryMb ?? builtIn.resources.memoryMb ?? 1024,
      pidsMax: pidsMax ?? DEFAULT_PIDS_MAX,
      network: network ?? null,
      warnBeforeLimitSeconds: warnMinutes !== undefined ? warnMinutes * 60 : null,
    });
    return read.kind === "Valid" ? { kind: "Valid", profiles: read.profiles.map(identity) } : read;
  }
  const profiles = defaultLocalProfiles()
    .map(
      (p): ResourceProfile => ({
        ...p,
        resources: {
          ...p.resources,
          memoryMb: memoryMb ?? p.resources.memoryMb,
        },
        pidsMax: pidsMax ?? p.pidsMax ?? DEFAULT_PIDS_MAX,
        network: network ?? p.network ?? "host",
        ...(warnMinutes !== undefined ? { warnBeforeLimitSeconds: warnMinutes * 60 } : {}),
      }),
    )
    .map(identity);
  return { kind: "Valid", profiles };
}
