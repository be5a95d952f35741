/**
 * The JSON shapes of a profile as `GET /v1/profiles` and the Jupyter door list it: the public
 * view only (a backend's mapping onto its own queues never leaves the daemon), its defaults
 * and maxima, and whether each kind can be placed now.
 */
import type { ProfileRunAs, ResourceProfile, WorkloadKind } from "../../../core/models.ts";
import type { ProfileCheck } from "../../../core/ports/allocation-backend.ts";
import type { Caller } from "../../../core/principals.ts";
import type { ProfileBreakerState } from "../../../core/reconciler/profile-breaker.ts";
import { profileBounds } from "../../../core/resources.ts";
import { iso } from "../views.ts";

/** Whether a kind can be placed on a profile now; `reason` (UPPER_SNAKE) says why not. */
export interface PlacementView {
  readonly placeable: boolean;
  readonly reason: string | null;
  readonly message: string | null;
}

export interface ProfileView {
  readonly name: string;
  readonly description: string;
  readonly kinds: readonly WorkloadKind[];
  /** The profile's defaults, with its maxima and task and array limits filled in. */
  readonly resources: ResourceProfile["resources"] & {
    readonly maxCpus: number;
    readonly maxMemoryMb: number | null;
    readonly maxGpus: number;
    readonly maxTimeLimitSeconds: number | null;
    readonly maxTasks: number;
    readonly maxArraySize: number;
  };
  /** "none": its jobs get their own network namespace, loopback only; "host": the machine's. */
  readonly network: "host" | "none";
  readonly runAs: ProfileRunAs;
  readonly mounts: readonly { readonly target: string; readonly mode: "ro" | "rw" }[];
  readonly environments: readonly { readonly name: string; readonly displayName: string }[];
}

/** The public view only: a backend's mapping onto its own queues never leaves the daemon. */
export function profileView(p: ResourceProfile): ProfileView {
  return {
    name: p.name,
    description: p.description,
    kinds: [...p.kinds],
    resources: {
      nodes: p.resources.nodes,
      cpus: p.resources.cpus,
      gpus: p.resources.gpus,
      memoryMb: p.resources.memoryMb,
      timeLimitSeconds: p.resources.timeLimitSeconds,
      ...maximaView(p),
      maxTasks: p.maxTasks ?? 1,
      maxArraySize: p.maxArraySize ?? 0,
    },
    network: p.network ?? "host",
    runAs: p.runAs ?? "allocation",
    // Where and how, never from where: a host path is the admin's business.
    mounts: (p.mounts ?? []).map((m) => ({ target: m.target, mode: m.mode })),
    // Names to choose from; the interpreters' paths and module lines are the admin's.
    environments: (p.environments ?? []).map((e) => ({ name: e.name, displayName: e.displayName })),
  };
}

/** Each maximum, the default where the profile states none (core/resources.ts). */
function maximaView(p: ResourceProfile) {
  const bounds = profileBounds(p);
  return {
    maxCpus: bounds.cpus,
    maxMemoryMb: bounds.memoryMb,
    maxGpus: bounds.gpus,
    maxTimeLimitSeconds: bounds.timeLimitSeconds,
  };
}

/** A profile as `GET /v1/profiles` lists it: with whether each kind can be placed now. */
export interface ListedProfileView extends ProfileView {
  readonly placement: Readonly<Partial<Record<WorkloadKind, PlacementView>>>;
  /** Set while the backend keeps refusing the profile (its breaker is open); else null. */
  readonly degraded: DegradedProfileView | null;
}

/**
 * A profile no job can be placed on as it stands: the scheduler's dry run refuses it
 * (SCHEDULER_REFUSES), or its breaker is open, the backend having refused its last
 * submissions (SUBMISSIONS_REFUSED).
 */
export interface DegradedProfileView {
  readonly reason: "SCHEDULER_REFUSES" | "SUBMISSIONS_REFUSED";
  /** The scheduler's own words (the admin's); a principal's have the site's names hidden. */
  readonly message: string;
  readonly consecutiveRejections: number;
  readonly since: string;
  /** When one submission is tried again; null while the breaker is closed. */
  readonly retryAt: string | null;
}

/** The breaker of one profile as the reconciler keeps it (profile-breaker.ts). */
export type BreakerState = ProfileBreakerState;

/** Each profile's breaker by name, read once per request (absent from the map: closed, none). */
export function breakerStates(reconciler: {
  readonly profileBreakers?: () => readonly {
    readonly profile: string;
    readonly state: BreakerState;
  }[];
}): ReadonlyMap<string, BreakerState> {
  return new Map((reconciler.profileBreakers?.() ?? []).map((b) => [b.profile, b.state]));
}

export function degradedView(state: BreakerState | undefined): DegradedProfileView | null {
  if (state === undefined || state.kind !== "Open") return null;
  return {
    reason: "SUBMISSIONS_REFUSED",
    message: state.message,
    consecutiveRejections: state.consecutiveRejections,
    since: iso(state.openedAtMs),
    retryAt: iso(state.retryAtMs),
  };
}

/**
 * A profile as degraded for this caller. The scheduler's refusal of its dry run comes first:
 * it says why every job of it will fail (a queue the cluster does not have), where the
 * breaker only counts the failures. The admin reads the scheduler's own words; a principal
 * the form workload messages have, the site's placement names hidden.
 */
export function profileDegradedView(
  breaker: BreakerState | undefined,
  check: ProfileCheck | undefined,
  caller: Caller,
): DegradedProfileView | null {
  const open = degradedView(breaker);
  if (check === undefined || check.outcome !== "IMPOSSIBLE") return open;
  return {
    reason: "SCHEDULER_REFUSES",
    message: caller.kind === "Admin" ? check.detail : check.publicDetail,
    consecutiveRejections: open?.consecutiveRejections ?? 0,
    since: iso(check.since),
    retryAt: open?.retryAt ?? null,
  };
}
