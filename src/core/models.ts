/**
 * The vocabulary of the orchestration core: what work was requested (a Workload), what one
 * attempt at it was granted (an Allocation, with exactly one executionEpoch), and the phases
 * and reason codes both move through.
 *
 * Naming is fixed so two vocabularies cannot blur: the incarnation counter that must refuse
 * stale values (INV-7) is `executionEpoch`; the version of the declarative spec is
 * `specRevision`. The kernel layer's word for the former is never used here.
 *
 * Over 400 lines because it is the one vocabulary every layer shares (phases, reasons, the
 * workload and allocation records); split, its parts would only import each other.
 */
import type { Dependency } from "./dependencies.ts";
import type { ProfileMount } from "./mounts.ts";
import type { ResourceMaxima, ResourceRequest } from "./resources.ts";

export const WORKLOAD_KINDS = ["SESSION", "BATCH"] as const;
export type WorkloadKind = (typeof WORKLOAD_KINDS)[number];

/**
 * Workload and allocation phases. The order is not a state machine: the reconciler decides
 * legal moves. What matters for invariants is which phases are terminal and which phases
 * mean "an allocation may exist at the backend" (see ACTIVE_ALLOCATION_PHASES).
 */
export const PHASES = [
  "PENDING",
  "SUBMITTING",
  "QUEUED",
  "RUNNING",
  "STOPPING",
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "LOST",
] as const;
export type Phase = (typeof PHASES)[number];

export const TERMINAL_PHASES = ["COMPLETED", "FAILED", "CANCELLED", "LOST"] as const;
export type TerminalPhase = (typeof TERMINAL_PHASES)[number];

/**
 * The phases in which an allocation may hold (or be about to hold) resources at the backend.
 * SUBMITTING is included on purpose: a submission whose answer was lost (Unknown) may have
 * landed, so a second attempt must not start beside it (INV-8). This list is the only
 * readable copy of the set the store's partial unique index enforces; a test proves the two
 * agree.
 */
export const ACTIVE_ALLOCATION_PHASES = ["SUBMITTING", "QUEUED", "RUNNING", "STOPPING"] as const;
export type ActiveAllocationPhase = (typeof ACTIVE_ALLOCATION_PHASES)[number];

const terminalSet: ReadonlySet<Phase> = new Set(TERMINAL_PHASES);
const activeSet: ReadonlySet<Phase> = new Set(ACTIVE_ALLOCATION_PHASES);

export function isTerminal(phase: Phase): phase is TerminalPhase {
  return terminalSet.has(phase);
}

export function isActiveAllocation(phase: Phase): phase is ActiveAllocationPhase {
  return activeSet.has(phase);
}

const phaseSet: ReadonlySet<string> = new Set(PHASES);

export function isPhase(value: string): value is Phase {
  return phaseSet.has(value);
}

/** Namespaced helpers, so call sites read `Phase.isTerminal(p)` as in the design. */
export const Phase = {
  all: PHASES,
  terminal: TERMINAL_PHASES,
  activeAllocation: ACTIVE_ALLOCATION_PHASES,
  isTerminal,
  isActiveAllocation,
  isPhase,
} as const;

/**
 * Reason codes (appendix C of the plan). Every terminal phase and every refusal carries one.
 * BACKEND_UNAVAILABLE is an observation, never a terminal reason: an unreachable backend
 * leaves every phase where it was.
 */
export const REASONS = [
  "SUBMITTED",
  "ACCEPTED",
  "STARTED",
  "EXITED_ZERO",
  "NONZERO_EXIT",
  "TIME_LIMIT_EXCEEDED",
  "OUT_OF_MEMORY",
  "NODE_FAILURE",
  "PREEMPTED",
  "BOOT_FAILURE",
  "DEADLINE_EXCEEDED",
  "SUSPENDED",
  "REQUEUED",
  "SUBMIT_REJECTED",
  "SUBMIT_UNKNOWN",
  // The backend refused the profile's last submissions: its workloads wait, retried later.
  "PROFILE_DEGRADED",
  // Refused once while its profile's breaker was still learning: it waits until the profile
  // is shown refused for all (it then waits as PROFILE_DEGRADED) or shown working (it fails).
  "SUBMIT_REFUSED",
  // The unix account its owner's work runs as cannot run it (deleted, root, a system account).
  "ACCOUNT_UNUSABLE",
  "USER_CANCELLED",
  "CANCELLED_BY_BACKEND",
  "IDLE_TIMEOUT",
  "MAX_LIFETIME",
  "NOT_FOUND_BY_BACKEND",
  "ISOLATION_UNAVAILABLE",
  "BACKEND_UNAVAILABLE",
  "RETRYING",
  "ATTEMPTS_EXHAUSTED",
  "SUPERSEDED",
  "WORKER_CONNECTED",
  "WORKER_MISSING",
  "WORKSPACE_VISIBLE",
  "WORKSPACE_NOT_VISIBLE",
  "KERNEL_RESPONSIVE",
  "KERNEL_UNRESPONSIVE",
  "KERNEL_DIED",
  "KERNEL_RESTARTED",
  "ALLOCATION_RUNNING",
  "ALLOCATION_NOT_RUNNING",
  "READY",
  "INTERNAL_ERROR",
  // Infrastructure, not the job: the spool's filesystem was full (ENOSPC), so the job could
  // not write its files or logs, or new work is refused until space returns.
  "SPOOL_FULL",
  // The session's environment cannot run on its node (a path not there, a module line that
  // fails): the worker said so, naming it and the node, instead of starting a kernel.
  "ENVIRONMENT_UNAVAILABLE",
  // Why an allocation waits or was ended by someone else, each with its own user action
  // (README lists what each asks the user to do).
  "WAITING_FOR_RESOURCES",
  "HELD",
  "LIMIT_REACHED",
  "NODES_UNAVAILABLE",
  "CANNOT_START",
  "ADMIN_CANCELLED",
  // An event, not a phase: the allocation is within its warning time of its time limit.
  "TIME_LIMIT_NEAR",
  // Dependencies (core/dependencies.ts): waiting for its parents, or one ended so it never can.
  "DEPENDENCY",
  "DEPENDENCY_NEVER_SATISFIED",
  // Created held (`hold`), e.g. for its input to be uploaded: it waits for its release.
  "AWAITING_RELEASE",
] as const;
export type Reason = (typeof REASONS)[number];

const reasonSet: ReadonlySet<string> = new Set(REASONS);

// Called for every row the store decodes (10,000 per tick at scale): a set, not a scan.
export function isReason(value: string): value is Reason {
  return reasonSet.has(value);
}

/** Allocation ends after which a workload with attempts left gets a new attempt. */
export const RECOVERABLE_REASONS: ReadonlySet<Reason> = new Set<Reason>([
  "NOT_FOUND_BY_BACKEND",
  "NODE_FAILURE",
  "PREEMPTED",
]);

declare const externalHandleBrand: unique symbol;
/**
 * The backend's own identifier for an allocation, kept opaque so no call site in the core
 * can start interpreting it (INV-2 survives a dozen call sites only if the type says so).
 */
export type ExternalHandle = string & { readonly [externalHandleBrand]: true };
export function externalHandle(raw: string): ExternalHandle {
  if (raw.length === 0) throw new Error("ExternalHandle must not be empty");
  return raw as ExternalHandle;
}

declare const submissionTokenBrand: unique symbol;
/**
 * Minted and persisted before a submission is attempted: "did my submission land?" must be a
 * question about what the backend was asked to record (INV-8). Its alphabet is [a-z0-9-] and
 * it is at most 40 characters, so any backend can carry it in a name or comment field.
 */
export type SubmissionToken = string & { readonly [submissionTokenBrand]: true };

const SUBMISSION_TOKEN_PATTERN = /^o4s-[a-z0-9]{26}$/;

export function isSubmissionToken(raw: string): raw is SubmissionToken {
  return SUBMISSION_TOKEN_PATTERN.test(raw);
}

export function submissionToken(raw: string): SubmissionToken {
  if (!isSubmissionToken(raw)) throw new Error(`not a submission token: ${JSON.stringify(raw)}`);
  return raw;
}

const TOKEN_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/** 26 characters of base36 from a CSPRNG: about 134 bits, unguessable and collision-free. */
export function mintSubmissionToken(randomBytes: (n: number) => Uint8Array): SubmissionToken {
  const bytes = randomBytes(26);
  let out = "o4s-";
  for (const b of bytes) out += TOKEN_ALPHABET[b % 36];
  return out as SubmissionToken;
}

/** The event message of a workload's attempt with this epoch ("attempt 2 of 3"). */
export function attemptMessage(epoch: number, maxAttempts: number): string {
  return `attempt ${epoch} of ${Math.max(maxAttempts, epoch)}`;
}

/** What a scientist asks for, in their units. Scheduler mapping lives in a backend. */
export interface ResourceProfile {
  readonly name: string;
  readonly description: string;
  readonly kinds: readonly WorkloadKind[];
  readonly resources: {
    readonly nodes: number;
    readonly cpus: number;
    readonly gpus: number;
    readonly memoryMb: number | null;
    readonly timeLimitSeconds: number | null;
  };
  /**
   * How far a submission may raise `resources` (core/resources.ts): each field left out is
   * its default, so a profile without maxima runs every job on its defaults or less.
   */
  readonly maxima?: ResourceMaxima;
  /**
   * How long before an allocation's time limit it is warned (an event, and a signal to the
   * job where the backend can send one); 0 turns the warning off. Absent: the default
   * (reconciler/runway.ts). Never shown by the API.
   */
  readonly warnBeforeLimitSeconds?: number;
  /**
   * The most processes an allocation may hold at once (local backend: cgroup pids.max, or
   * RLIMIT_NPROC without cgroups). Absent: DEFAULT_PIDS_MAX.
   */
  readonly pidsMax?: number;
  /** "none": each allocation gets its own network namespace with only loopback. Absent: "host". */
  readonly network?: ProfileNetwork;
  /**
   * The most elements one job array may have on this profile (a site-wide scheduler limit).
   * Absent: the profile runs no arrays, and a BATCH asking for one is refused naming `array`.
   */
  readonly maxArraySize?: number;
  /**
   * The most tasks one BATCH workload of this profile may ask for (`tasks`); absent: 1, a
   * single command on the first node (the only form the local backend runs).
   */
  readonly maxTasks?: number;
  /**
   * A session cell's output cap, in characters per stream (the first and last halves are
   * sent; the whole output goes to a file in the workspace). Absent: the kernel's default
   * (200,000). Never shown by the API.
   */
  readonly maxOutputChars?: number;
  /**
   * Who its jobs run as: "allocation" (absent: the admin's choice at start, a uid per
   * workload) or "owner" (a principal's job runs as the principal's own unix account).
   */
  readonly runAs?: ProfileRunAs;
  /**
   * Host directories bound into every launch of the profile (the admin's, never a request's).
   * Sources are the admin's business: the API shows targets and modes only.
   */
  readonly mounts?: readonly ProfileMount[];
  /**
   * Named software environments a SESSION may pick (`environment`): each its own kernelspec
   * `PROFILE/ENV`. Absent or empty: the node's python3 only.
   */
  readonly environments?: readonly ProfileEnvironment[];
}

/**
 * An environment an admin declares on a profile: the interpreter the kernel runs, the
 * prefix (a venv or conda env) bound read-only into the sandbox, and environment-module
 * lines run in a shell before the kernel starts. All the admin's, never a request's.
 */
export interface ProfileEnvironment {
  readonly name: string;
  readonly displayName: string;
  /** Absolute path of the interpreter: `python`, or `PREFIX/bin/python`. */
  readonly python: string;
  /** The venv or conda prefix, bound read-only; null: an interpreter of the node's own. */
  readonly prefix: string | null;
  /** Shell lines (`module load gcc/12`) run before the kernel starts; empty: none. */
  readonly moduleLines: readonly string[];
}

export type ProfileNetwork = "host" | "none";
export type { ProfileMount } from "./mounts.ts";
export type { ResourceMaxima, ResourceRequest } from "./resources.ts";
export type ProfileRunAs = "allocation" | "owner";

/** Processes per allocation when its profile names none: far above science code, far below pid_max. */
export const DEFAULT_PIDS_MAX = 4096;

/**
 * The durable spec: what operators read back. The submitted spec is derived from it per
 * attempt (AttemptPreparer), so credentials bound to (allocation, epoch) never live here.
 */
export interface WorkloadSpec {
  readonly command?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly timeLimitSeconds?: number;
  /** CPUs, memory and GPUs per node asked within the profile's maxima; absent: its defaults. */
  readonly resources?: ResourceRequest;
  readonly idleTimeoutSeconds?: number;
  readonly maxLifetimeSeconds?: number;
  /** BATCH only: run `array` elements of the command (0..array-1) from one submission. */
  readonly array?: number;
  /** With `array`: at most this many elements at once. */
  readonly maxConcurrent?: number;
  /**
   * BATCH: how many copies of the command the in-allocation launcher starts (MPI ranks),
   * each in its own sandbox with the scheduler's per-task variables. Absent: one, run as
   * the batch step itself.
   */
  readonly tasks?: number;
  /** BATCH with `tasks`: at most this many on one node (the scheduler spreads the rest). */
  readonly tasksPerNode?: number;
  /** SESSION: one of its profile's environments, by name. Absent: the node's python3. */
  readonly environment?: string;
}

/** What the reconciler wants for a workload. STOP carries why it was asked to stop. */
export type DesiredState =
  | { readonly kind: "RUN" }
  | { readonly kind: "STOP"; readonly reason: Reason; readonly message: string };

export interface Workload {
  readonly id: string;
  readonly kind: WorkloadKind;
  readonly name: string;
  readonly profile: string;
  readonly spec: WorkloadSpec;
  readonly specRevision: number;
  readonly phase: Phase;
  readonly reason: Reason | null;
  readonly message: string | null;
  /**
   * The scheduler's own words where `message` hides the site's names (core/scheduler-words.ts):
   * the admin's; absent or null: `message` is everyone's.
   */
  readonly messageAdmin?: string | null;
  readonly desired: DesiredState;
  readonly executionEpoch: number;
  readonly maxAttempts: number;
  readonly exitCode: number | null;
  readonly idempotencyKey: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** Set by user activity only (exec, tasks); never by heartbeats. Epoch milliseconds. */
  readonly lastActiveAt: number | null;
  /** The principal that submitted it; null or absent: the admin. */
  readonly owner?: string | null;
  /** Created held and not released yet: the reconciler submits nothing. Absent: false. */
  readonly held?: boolean;
  /** The workloads it runs after (core/dependencies.ts); absent or empty: none. */
  readonly after?: readonly Dependency[];
}

/** One attempt at a workload, with one executionEpoch and one SubmissionToken. */
export interface Allocation {
  readonly id: string;
  readonly workloadId: string;
  readonly epoch: number;
  readonly token: SubmissionToken;
  readonly handle: ExternalHandle | null;
  readonly phase: Phase;
  readonly reason: Reason | null;
  readonly message: string | null;
  readonly exitCode: number | null;
  readonly submittedAt: number | null;
  readonly startedAt: number | null;
  readonly endedAt: number | null;
  /** When a TerminalAllocationAcknowledger fact for this allocation was acknowledged. */
  readonly acknowledgedAt: number | null;
  /**
   * Epoch ms at which the backend ends this allocation at the latest (its time limit, as the
   * backend itself computed it); null when not known (yet) or unlimited.
   */
  readonly deadlineAt: number | null;
  /** When the near-the-limit warning event was written; null until then. */
  readonly deadlineWarnedAt: number | null;
  /**
   * A job array's size, fixed when the attempt is minted from its workload's spec; absent
   * or null: one job. What tells the backend to read the allocation as an array.
   */
  readonly arraySize?: number | null;
  /**
   * A job array's elements as last observed (core/array/array-view.ts, as JSON text); absent
   * or null: one job, or not observed yet.
   */
  readonly arrayViewJson?: string | null;
}

export const CONDITION_TYPES = [
  "ALLOCATION_RUNNING",
  "WORKER_CONNECTED",
  "WORKSPACE_VISIBLE",
  "KERNEL_RESPONSIVE",
  "READY",
] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];
export type ConditionStatus = "TRUE" | "FALSE" | "UNKNOWN";

export interface Condition {
  readonly type: ConditionType;
  readonly status: ConditionStatus;
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: number;
}

export interface TransitionEvent {
  readonly workloadId: string;
  readonly allocationId: string | null;
  readonly at: number;
  readonly phase: Phase;
  readonly reason: Reason | null;
  readonly message: string | null;
  /** As the workload's `messageAdmin`: the admin's form; absent or null: `message`. */
  readonly messageAdmin?: string | null;
}
