/**
 * Who is calling (issue 22): the admin, who sees and does everything, or a principal, who
 * sees only its own workloads and is held to its limits. The limit rule is pure: the store
 * runs it inside the transaction that inserts the workload, so twenty concurrent submissions
 * over a limit of three leave exactly three.
 */
import type { WorkloadKind } from "./models.ts";

/** A principal's ceilings; null is no ceiling. */
export interface PrincipalLimits {
  readonly maxSessions: number | null;
  readonly maxBatch: number | null;
  readonly maxCpus: number | null;
  readonly maxGpus: number | null;
}

export const NO_LIMITS: PrincipalLimits = Object.freeze({
  maxSessions: null,
  maxBatch: null,
  maxCpus: null,
  maxGpus: null,
});

export interface Principal extends PrincipalLimits {
  readonly name: string;
  /** The unix account this principal is (peer credentials, run-as-owner); null: none. */
  readonly unixUser: string | null;
  readonly createdAt: number;
}

export type Caller =
  | { readonly kind: "Admin" }
  | {
      readonly kind: "Principal";
      readonly name: string;
      /** The token's id (never its secret), for logs and audit. */
      readonly tokenId: string | null;
    };

export const ADMIN: Caller = Object.freeze({ kind: "Admin" });

/**
 * The one ownership rule, applied by every door (the HTTP API, Jupyter's kernels, sessions and
 * contents, MCP's tools and resources, /ui): the admin may use every workload, a principal
 * only its own. `owner` undefined: there is no such workload. Every door answers a workload
 * the caller may not use exactly as one that does not exist, so existence is not leaked.
 */
export function mayUse(caller: Caller, owner: string | null | undefined): boolean {
  if (owner === undefined) return false;
  return caller.kind === "Admin" || owner === caller.name;
}

/** What every list is narrowed to for the caller: a principal's hold only its own. */
export function listScope(caller: Caller): { readonly owner?: string } {
  return caller.kind === "Principal" ? { owner: caller.name } : {};
}

/** The owner recorded on a workload the caller submits: null for the admin. */
export function ownerOf(caller: Caller): string | null {
  return caller.kind === "Admin" ? null : caller.name;
}

/** What an owner's live workloads hold now. */
export interface PrincipalUsage {
  readonly sessions: number;
  readonly batch: number;
  readonly cpus: number;
  readonly gpus: number;
}

/** Stable names of the limits, as the 429's `limit` says them. */
export type LimitName = "sessions" | "batch" | "cpus" | "gpus";

export interface LimitExceeded {
  readonly limit: LimitName;
  /** What the owner holds now, before this workload. */
  readonly current: number;
  readonly max: number;
}

/** The new workload's ask: its kind and what its profile holds. */
export interface WorkloadAsk {
  readonly kind: WorkloadKind;
  readonly cpus: number;
  readonly gpus: number;
}

/**
 * What a workload's live allocations hold at most at once, which its owner's CPU and GPU
 * limits count: per allocation, its tasks' CPUs (a multi-task BATCH: `tasks` x the profile's
 * CPUs per task) or every node's CPUs, and every node's GPUs; times the array elements that
 * may run at once (`maxConcurrent`, else all of them). Counting the profile's per-node
 * figures once let a principal limited to 8 CPUs hold 8 x 100 through one array, or a
 * 16-task job on 2-CPU tasks count as 2.
 */
export function resourcesHeld(
  resources: { readonly nodes: number; readonly cpus: number; readonly gpus: number },
  spec: {
    readonly tasks?: number;
    readonly array?: number;
    readonly maxConcurrent?: number;
  },
): { readonly cpus: number; readonly gpus: number } {
  const tasks = spec.tasks ?? 1;
  const cpus = tasks > 1 ? tasks * resources.cpus : resources.cpus * resources.nodes;
  const gpus = resources.gpus * resources.nodes;
  const elements = spec.array ?? 1;
  const atOnce = Math.min(elements, spec.maxConcurrent ?? elements);
  return { cpus: cpus * atOnce, gpus: gpus * atOnce };
}

/** The first limit this workload would cross, or null when it fits. Pure. */
export function limitExceeded(
  limits: PrincipalLimits,
  usage: PrincipalUsage,
  ask: WorkloadAsk,
): LimitExceeded | null {
  if (ask.kind === "SESSION" && limits.maxSessions !== null) {
    if (usage.sessions + 1 > limits.maxSessions) {
      return { limit: "sessions", current: usage.sessions, max: limits.maxSessions };
    }
  }
  if (ask.kind === "BATCH" && limits.maxBatch !== null && usage.batch + 1 > limits.maxBatch) {
    return { limit: "batch", current: usage.batch, max: limits.maxBatch };
  }
  if (limits.maxCpus !== null && usage.cpus + ask.cpus > limits.maxCpus) {
    return { limit: "cpus", current: usage.cpus, max: limits.maxCpus };
  }
  if (limits.maxGpus !== null && usage.gpus + ask.gpus > limits.maxGpus) {
    return { limit: "gpus", current: usage.gpus, max: limits.maxGpus };
  }
  return null;
}

/** A principal's name: what tokens, listings and `--owner` say. */
export const PRINCIPAL_NAME_PATTERN = /^[a-z_][a-z0-9_.-]{0,31}$/;
