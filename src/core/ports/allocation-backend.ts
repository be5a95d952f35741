/**
 * The boundary any resource plane presents to the orchestration core. Nothing here names a
 * scheduler (INV-2); a backend translates its own vocabulary into these shapes.
 *
 * Every call takes a batch: the reconciler observes all active allocations of a tick in one
 * call, submits every attempt of a tick in one call (so a backend can share one token lookup
 * between them), and cancels in one call. A backend that talks to a scheduler can therefore
 * keep its scheduler calls per tick constant as the number of workloads grows.
 */
import type { ArrayRequest } from "../array/array-request.ts";
import type { ArraySummary } from "../array/array-summary.ts";
import type {
  ExternalHandle,
  Phase,
  Reason,
  ResourceProfile,
  SubmissionToken,
  WorkloadKind,
} from "../models.ts";
import type { ResourceRequest } from "../resources.ts";
import type { BackendCapabilities } from "./backend-capabilities.ts";

// The capability record and each capability: ports/backend-capabilities.ts.
export * from "./backend-capabilities.ts";

/**
 * A COMMAND run as several tasks by the backend's in-allocation launcher, each in its own
 * sandbox seeing its rank; tasks of one allocation on one node share a private /tmp and
 * /dev/shm (MPI's shared-memory transport). Only a backend whose profiles allow it gets it.
 */
export interface LaunchTasks {
  readonly count: number;
  /** At most this many on one node; null: as the scheduler places them. */
  readonly perNode: number | null;
  /**
   * Set by the launch wrapper: who must own the node's shared /tmp and /dev/shm (the job's
   * identity; null: the launcher's own uid, a daemon that is not root).
   */
  readonly owner?: { readonly uid: number; readonly gid: number } | null;
}

/** How the allocation's processes are started. Derived per attempt by the AttemptPreparer. */
export type Launch =
  | {
      readonly kind: "COMMAND";
      readonly command: readonly string[];
      readonly env: Readonly<Record<string, string>>;
      /** Absent: the command runs once, as the allocation's main process. */
      readonly tasks?: LaunchTasks;
    }
  | {
      /**
       * One worker per node. The backend starts `workerCommand` followed by
       * `--rank-env NAME`, naming the environment variable its launcher sets to the rank;
       * the worker reads the credential file for that rank from `credentialDir`. Only the
       * directory path is handed over: no credential value enters the environment or argv.
       */
      readonly kind: "WORKER";
      readonly workerCommand: readonly string[];
      readonly credentialDir: string;
      readonly ranks: number;
      readonly env: Readonly<Record<string, string>>;
      /**
       * The profile's environment the session chose (its interpreter is already on the
       * worker's argv): the backend checks it exists where the worker runs, and the sandbox
       * binds its prefix read-only. Absent: the node's python3.
       */
      readonly environment?: {
        readonly name: string;
        readonly python: string;
        readonly prefix: string | null;
      };
    };

export interface SubmitRequest {
  readonly allocationId: string;
  readonly workloadId: string;
  readonly workloadKind: WorkloadKind;
  readonly token: SubmissionToken;
  readonly epoch: number;
  readonly profile: string;
  readonly name: string;
  readonly launch: Launch;
  readonly timeLimitSeconds: number | null;
  /**
   * CPUs, memory and GPUs per node asked within the profile's maxima (admission checked
   * them): the backend puts them in place of the profile's defaults. Absent: the defaults.
   */
  readonly resources?: ResourceRequest;
  /** Directory the daemon owns for this allocation: logs, markers, credentials live here. */
  readonly allocationDir: string;
  /** The workload's workspace (its working directory). */
  readonly workspaceDir: string;
  /**
   * Set by the reconciler only for a token it minted in this process and has never handed to
   * any backend call: nothing can carry it yet, so the lookup before submitting (a scheduler
   * round trip) is provably useless and may be skipped. Absent on a retry, after a crash or
   * an Unknown: then the backend looks the token up first, as always (INV-8).
   */
  readonly freshToken?: true;
  /**
   * A job array: `array.size` elements of the same launch from this one submission and this
   * one token, each told its index. Absent: one job, as always.
   */
  readonly array?: ArrayRequest;
  /**
   * The principal that owns the workload (null or absent: the admin). On a profile whose
   * work runs as its owner, it decides the unix account the job runs as.
   */
  readonly owner?: string | null;
  /**
   * Set by the launch wrapper, never by the reconciler: the unix account a cluster backend
   * submits the job as (only a root daemon may), so the scheduler runs and
   * charges it as that account. Absent: the daemon's own account submits, as always.
   */
  readonly submitAs?: { readonly account: string; readonly uid: number; readonly gid: number };
}

export interface Created {
  readonly kind: "Created";
  readonly token: SubmissionToken;
  readonly handle: ExternalHandle;
}
/** A submission with this token is already there: what makes a retry safe. */
export interface Existing {
  readonly kind: "Existing";
  readonly token: SubmissionToken;
  readonly handle: ExternalHandle;
}
/** An answer: the workload can fail cleanly. */
export interface Rejected {
  readonly kind: "Rejected";
  readonly token: SubmissionToken;
  readonly message: string;
  /**
   * The scheduler's own words where `message` hides the site's names (core/scheduler-words.ts),
   * for the admin; absent: `message` is already what the scheduler said.
   */
  readonly messageAdmin?: string;
  /**
   * Refused for this request alone, by the backend's own checks before its scheduler was
   * asked (an argument its launch cannot carry): says nothing about the profile, so it does
   * not count towards the profile's breaker, or one client could degrade a profile for all.
   */
  readonly byRequest?: true;
  /**
   * Refused because the unix account the owner's work runs as cannot run it: that owner's
   * failure alone, never the profile's (one person who left stalled everyone's work).
   */
  readonly reason?: "ACCOUNT_UNUSABLE";
}
/**
 * Not "retry me": the caller must first reconcile by token, because a blind retry is how one
 * submission becomes two jobs each holding a GPU. It carries its token so the caller cannot
 * skip that step by failing to fish the token out of state.
 */
export interface Unknown {
  readonly kind: "Unknown";
  readonly token: SubmissionToken;
  readonly message: string;
}
export type SubmitResult = Created | Existing | Rejected | Unknown;

/** What the backend knows of one allocation, in orchestration terms. */
export type AllocationObservation =
  | {
      readonly kind: "Observed";
      /** QUEUED, RUNNING, STOPPING or a terminal phase. */
      readonly phase: Phase;
      readonly reason: Reason | null;
      readonly message: string | null;
      readonly exitCode: number | null;
      readonly startedAt: number | null;
      readonly endedAt: number | null;
      /**
       * Epoch ms at which the backend will end the allocation at the latest: its time limit,
       * from the backend's own end time for a started allocation (never an estimate for a
       * queued one). Null or absent: not known, or no limit. What TIME_REMAINING and the
       * near-the-limit warning rest on.
       */
      readonly deadlineAt?: number | null;
      /** A job array's elements, compactly; the phase above is theirs by array-summary.ts. */
      readonly array?: ArraySummary;
    }
  /**
   * The backend could not say this time (a lagging accounting record, a partial outage). The
   * caller changes nothing. Never a reason to call the allocation LOST.
   */
  | { readonly kind: "Indeterminate"; readonly message: string };

export interface ObservationTarget {
  readonly allocationId: string;
  readonly token: SubmissionToken;
  readonly handle: ExternalHandle;
  /** A job array's size: its elements are observed and summarised. Absent: one job. */
  readonly arraySize?: number;
}

export type ObserveResult =
  /** BACKEND_UNAVAILABLE: changes no phase. */
  | { readonly kind: "Unavailable"; readonly message: string }
  | {
      readonly kind: "Observed";
      /** Keyed by allocationId; every target has an entry. */
      readonly observations: ReadonlyMap<string, AllocationObservation>;
    };

export type FindResult =
  | {
      readonly kind: "Found";
      readonly handle: ExternalHandle;
      readonly observation: AllocationObservation;
    }
  /** A definite answer that nothing with this token exists: only this allows a new submit. */
  | { readonly kind: "Absent" }
  /** No answer. Never read as absence. */
  | { readonly kind: "Unavailable"; readonly message: string };

export type CancelResult =
  | { readonly kind: "Requested" }
  | { readonly kind: "Unavailable"; readonly message: string };

export interface BackendDiagnostics {
  readonly backend: string;
  readonly healthy: boolean;
  readonly message: string;
  /** Calls to the resource plane since start, by command or operation name. */
  readonly calls: Readonly<Record<string, number>>;
  /** Backends that sweep for orphans: what the last sweep found (null: none yet). */
  readonly orphans?: OrphanDiagnostics | null;
  /** Backends that ask their scheduler about each profile: the last answers. */
  readonly profileChecks?: readonly ProfileCheck[];
}

/**
 * The scheduler's dry run of a profile (a job shaped like it, never queued): whether such a
 * job could ever start, in the scheduler's own words, for the administrator.
 */
export interface ProfileCheck {
  readonly profile: string;
  readonly outcome: "POSSIBLE" | "IMPOSSIBLE" | "UNANSWERED";
  readonly detail: string;
  /**
   * The same with the site's placement names (queues, service classes, accounts) hidden: what a principal
   * may read (scheduler text names the site's queues, which never leave the daemon).
   */
  readonly publicDetail: string;
  /** Epoch ms of the answer. */
  readonly checkedAt: number;
  /** Epoch ms of the first of the answers in a row with this outcome. */
  readonly since: number;
}

export type OrphanPolicy = "report" | "cancel";

/**
 * Jobs at the backend that carry this daemon's identity but match no allocation row (a store
 * restored from an older backup, a lost state dir). Never adopted: reported, or cancelled
 * when the administrator's policy says so.
 */
export interface OrphanDiagnostics {
  readonly policy: OrphanPolicy;
  /** Epoch ms of the last sweep that got an answer. */
  readonly lastSweepAt: number | null;
  /** Why the last sweep had no answer; null when it had one. */
  readonly error: string | null;
  readonly jobs: readonly {
    readonly handle: string;
    readonly token: string;
    readonly state: string;
    readonly action: "REPORTED" | "CANCEL_REQUESTED" | "CANCEL_FAILED";
  }[];
}

export interface AllocationBackend {
  /** A short name for logs and diagnostics, e.g. "local". */
  readonly name: string;
  /** The profiles this backend can place work on (public view only). */
  profiles(): readonly ResourceProfile[];
  /**
   * Submit every request. Before submitting, the backend asks whether each token is already
   * out there; when that question cannot be answered the result is Unknown, never a second
   * submission. Keyed by token; every request has an entry.
   */
  submit(requests: readonly SubmitRequest[]): Promise<ReadonlyMap<SubmissionToken, SubmitResult>>;
  /** One call for all active allocations of a tick. */
  observe(targets: readonly ObservationTarget[]): Promise<ObserveResult>;
  /** Ask the backend to stop these allocations. Idempotent. Keyed by allocationId. */
  cancel(targets: readonly ObservationTarget[]): Promise<ReadonlyMap<string, CancelResult>>;
  /** Resolve tokens after an Unknown submission. Keyed by token; every token has an entry. */
  findByToken(
    tokens: readonly SubmissionToken[],
  ): Promise<ReadonlyMap<SubmissionToken, FindResult>>;
  diagnostics(): Promise<BackendDiagnostics>;
  /**
   * What this backend can do beyond the calls above, as one value: each capability is its
   * implementation or null. A wrapper carries the record as it is (`...base.capabilities`),
   * so a capability it did not think of is never lost, and a caller reads a field instead of
   * probing for methods (three wrappers once dropped a capability that way).
   */
  readonly capabilities: BackendCapabilities;
}
