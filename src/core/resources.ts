/**
 * Per-workload resources within a profile's bounds (issue 35). A profile's resources are the
 * defaults; its maxima say how far a submission may raise them. A maximum the profile leaves
 * out is its default, so a site that states none runs every job exactly as before. Pure.
 */
import type { ResourceProfile } from "./models.ts";

/** What a submission asks of its profile, per node as the profile counts; absent: the default. */
export interface ResourceRequest {
  readonly cpus?: number;
  readonly memoryMb?: number;
  readonly gpus?: number;
}

/** How far a submission may raise a profile's defaults; a field left out is its default. */
export interface ResourceMaxima {
  readonly cpus?: number;
  readonly memoryMb?: number;
  readonly gpus?: number;
  readonly timeLimitSeconds?: number;
}

/** A profile's bounds with its defaults filled in; null: the profile sets none. */
export interface ProfileBounds {
  readonly cpus: number;
  readonly memoryMb: number | null;
  readonly gpus: number;
  readonly timeLimitSeconds: number | null;
}

/** What one allocation of the workload gets per node: the request over the profile's defaults. */
export interface EffectiveResources {
  readonly nodes: number;
  readonly cpus: number;
  readonly memoryMb: number | null;
  readonly gpus: number;
}

/** One field asked above its bound: `path` as the request spells it, `max` the bound. */
export interface OverMaximum {
  readonly path: "resources.cpus" | "resources.memoryMb" | "resources.gpus" | "timeLimitSeconds";
  readonly asked: number;
  readonly max: number;
  readonly message: string;
}

export type ResourceCheck =
  | { readonly kind: "Fits" }
  | { readonly kind: "OverMaximum"; readonly fields: readonly OverMaximum[] };

type BoundedProfile = Pick<ResourceProfile, "name" | "resources" | "maxima">;

/** Each maximum, the default where the profile states none. */
export function profileBounds(profile: BoundedProfile): ProfileBounds {
  const r = profile.resources;
  const m = profile.maxima ?? {};
  return {
    cpus: m.cpus ?? r.cpus,
    memoryMb: m.memoryMb ?? r.memoryMb,
    gpus: m.gpus ?? r.gpus,
    timeLimitSeconds: m.timeLimitSeconds ?? r.timeLimitSeconds,
  };
}

/** The profile's defaults with what was asked in their place. */
export function effectiveResources(
  resources: ResourceProfile["resources"],
  asked: ResourceRequest | undefined,
): EffectiveResources {
  return {
    nodes: resources.nodes,
    cpus: asked?.cpus ?? resources.cpus,
    memoryMb: asked?.memoryMb ?? resources.memoryMb,
    gpus: asked?.gpus ?? resources.gpus,
  };
}

/**
 * The asked resources with only the fields given, in one key order, as a spec stores them;
 * none at all is stored as absent, so `resources: {}` and no `resources` are one request
 * (one idempotency hash).
 */
export function askedResources(
  asked:
    | {
        readonly cpus?: number | undefined;
        readonly memoryMb?: number | undefined;
        readonly gpus?: number | undefined;
      }
    | undefined,
): { readonly resources?: ResourceRequest } {
  if (asked === undefined) return {};
  const resources: { cpus?: number; memoryMb?: number; gpus?: number } = {};
  if (asked.cpus !== undefined) resources.cpus = asked.cpus;
  if (asked.memoryMb !== undefined) resources.memoryMb = asked.memoryMb;
  if (asked.gpus !== undefined) resources.gpus = asked.gpus;
  return Object.keys(resources).length === 0 ? {} : { resources };
}

const UNITS = {
  "resources.cpus": (n: number) => `${n} CPU${n === 1 ? "" : "s"} per node`,
  "resources.memoryMb": (n: number) => `${n} MB of memory per node`,
  "resources.gpus": (n: number) => `${n} GPU${n === 1 ? "" : "s"} per node`,
  timeLimitSeconds: (n: number) => `${n} seconds`,
} as const;

/**
 * Every asked figure above the profile's bound, each naming the field and the bound. A bound
 * of null (a profile with no memory or time limit of its own) bounds nothing, as a profile
 * without a time limit always allowed any.
 */
export function checkResources(
  profile: BoundedProfile,
  asked: ResourceRequest | undefined,
  timeLimitSeconds: number | undefined,
): ResourceCheck {
  const bounds = profileBounds(profile);
  const pairs: readonly [OverMaximum["path"], number | undefined, number | null][] = [
    ["resources.cpus", asked?.cpus, bounds.cpus],
    ["resources.memoryMb", asked?.memoryMb, bounds.memoryMb],
    ["resources.gpus", asked?.gpus, bounds.gpus],
    ["timeLimitSeconds", timeLimitSeconds, bounds.timeLimitSeconds],
  ];
  const fields: OverMaximum[] = [];
  for (const [path, value, max] of pairs) {
    if (value === undefined || max === null || value <= max) continue;
    fields.push({
      path,
      asked: value,
      max,
      message: `profile "${profile.name}" allows at most ${UNITS[path](max)} (asked ${value})`,
    });
  }
  return fields.length === 0 ? { kind: "Fits" } : { kind: "OverMaximum", fields };
}
