/**
 * The boundary any resource plane presents to the orchestration core. Nothing here names a
 * scheduler (INV-2); a backend translates its own vocabulary into these shapes.
 *
 * Every call takes a batch: the reconciler observes all active allocations of a tick in one
 * call, submits every attempt of a tick in one call (so a backend can share one token lookup
 * between them), and cancels in one call. A backend that talks to a scheduler can therefore
 * keep its scheduler calls per tick constant as the number of workloads grows.
 */
import type { ArrayRequest } from "./array/array-request.ts";
import type { ArraySummary } from "./array/array-summary.ts";
import type {
  ExternalHandle,
  Phase,
  Reason,
  ResourceProfile,
  SubmissionToken,
  WorkloadKind,
} from "./models.ts";
import type { LaunchSubject } from "./sandbox.ts";

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
   * Refused for this request alone, by the backend's own checks before its scheduler was
   * asked (an argument its launch cannot carry): says nothing about the profile, so it does
   * not count towards the profile's breaker, or one client could degrade a profile for all.
   */
  readonly byRequest?: true;
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

// ---------------------------------------------------------------------------------------
// Capabilities. Each stands alone and has its own field in BackendCapabilities; null says
// the backend has not got it, and callers say so instead of faking it.
// ---------------------------------------------------------------------------------------

export interface BackendCapabilities {
  /** Steps inside the allocation a workload already holds (INV-4). */
  readonly tasks: TaskRunner | null;
  /** What changed since a cursor, so a focused tick need not observe everything. */
  readonly changes: ChangeReporter | null;
  /** Durable facts about ended allocations, dropped once the store confirms the end. */
  readonly terminalFacts: TerminalAllocationAcknowledger | null;
  /** A verified per-allocation sandbox for SESSIONs; null: no SESSION is admitted. */
  readonly sessionIsolation: SessionIsolationProvider | null;
  /** Whether launches run in the verified sandbox now; null: taken as not sandboxed. */
  readonly launchSandbox: LaunchSandboxReporter | null;
  /** Why BATCH may not be placed now; null: BATCH is placed. */
  readonly batchGate: BatchPlacementGate | null;
  /** The backend's own rules for a job's environment; null: only the project-wide ones. */
  readonly jobEnv: JobEnvironmentPolicy | null;
}

export type CapabilityName = keyof BackendCapabilities;

/** A backend with none: the base every backend and test fake spreads its own over. */
export const NO_CAPABILITIES: BackendCapabilities = {
  tasks: null,
  changes: null,
  terminalFacts: null,
  sessionIsolation: null,
  launchSandbox: null,
  batchGate: null,
  jobEnv: null,
};

/** A backend whose record is known to hold each of `K` (a backend's own, precise type). */
export type BackendWith<K extends CapabilityName> = AllocationBackend & {
  readonly capabilities: BackendCapabilities & {
    readonly [P in K]: NonNullable<BackendCapabilities[P]>;
  };
};

export type TaskResult =
  | {
      readonly kind: "Completed";
      readonly exitCode: number;
      readonly stdout: string;
      readonly stderr: string;
    }
  /** No live allocation, or the backend refused: never a fallback to a new allocation (INV-4). */
  | { readonly kind: "Refused"; readonly message: string }
  | { readonly kind: "Unavailable"; readonly message: string };

export interface TaskRunner {
  /** Runs a step inside the allocation the workload already holds. */
  runTask(
    target: ObservationTarget,
    command: readonly string[],
    options: {
      readonly timeoutMs: number;
      /**
       * Set by the launch wrapper for a job submitted as its owner (see SubmitRequest's
       * `submitAs`): the step is started as that account too, as the scheduler lets no other
       * account, root included, start steps in it.
       */
      readonly submitAs?: { readonly uid: number; readonly gid: number };
      /**
       * Whose workload the step is in (its profile and owner): a launch wrapper binds the
       * profile's mounts into the step as into the job. Absent: the workspace's owner decides
       * who it runs as, and no mount is bound.
       */
      readonly subject?: LaunchSubject;
    },
  ): Promise<TaskResult>;
}

/** A durable fact the backend keeps about an ended allocation until told it may forget it. */
export interface TerminalFact {
  readonly token: SubmissionToken;
}

export interface TerminalAllocationAcknowledger {
  /** Facts the backend still holds about terminal allocations. */
  pendingTerminalFacts(): Promise<readonly TerminalFact[]>;
  /**
   * The caller has re-read the allocation from durable storage and confirmed its workload is
   * terminal or moved to a later epoch; the backend may now drop what it kept.
   */
  acknowledgeTerminal(token: SubmissionToken): Promise<void>;
}

/**
 * Where a backend's change feed was read up to. Opaque to the caller: handed back unchanged.
 */
export type ObservationCursor = string & { readonly __brand: "ObservationCursor" };

/** One allocation whose state changed, as the backend knows it (with the handle it holds). */
export interface ObservedChange {
  readonly target: ObservationTarget;
  readonly observation: AllocationObservation;
}

export type ObserveChangesResult =
  /** BACKEND_UNAVAILABLE: changes no phase; the caller keeps its cursor. */
  | { readonly kind: "Unavailable"; readonly message: string }
  /** The backend no longer knows this cursor: the caller observes everything again. */
  | { readonly kind: "CursorExpired" }
  | {
      readonly kind: "Observed";
      /** Every target has an entry, as in `observe`. */
      readonly observations: ReadonlyMap<string, AllocationObservation>;
      /**
       * Allocations whose state changed after `cursor`, whether or not they were among the
       * targets (empty when the cursor was null: the call only starts the feed).
       */
      readonly changes: readonly ObservedChange[];
      /** Read up to here: pass it to the next call. */
      readonly cursor: ObservationCursor;
    };

/**
 * Capability `changes`: a backend that can tell what changed since a cursor, so a caller
 * watching N allocations does not rebuild N observations every time it looks. A backend that
 * can only list everything (a queue listing has no "since") simply does not offer it, and
 * the caller observes every target each time. Both answers in one call, taken at one moment:
 * the targets' observations and the changes up to the returned cursor, so a change that
 * lands during the call is either in this answer or after the new cursor, never lost.
 */
export interface ChangeReporter {
  observeChanges(
    cursor: ObservationCursor | null,
    targets: readonly ObservationTarget[],
  ): Promise<ObserveChangesResult>;
}

export type IsolationVerdict =
  | {
      readonly kind: "Verified";
      readonly mechanism: string;
      /** The nodes a probe that ran elsewhere ran on (kept with a remembered verdict). */
      readonly nodes?: readonly string[];
    }
  | { readonly kind: "Unverified"; readonly message: string };

/**
 * Capability `sessionIsolation`. May allow interactive placement only when a verified
 * per-allocation OS identity, container or mount namespace keeps sibling tasks from reading
 * the workspace and the credential. A shared uid with 0700/0600 is not enough. A missing,
 * Unverified or throwing check refuses a SESSION.
 */
export interface SessionIsolationProvider {
  verifySessionIsolation(): Promise<IsolationVerdict>;
}

/**
 * Capability `launchSandbox`: whether the backend's launches currently run in its verified
 * per-allocation sandbox. Asked right before each submission and recorded per allocation; a
 * backend that does not say is taken as not sandboxing (SESSIONs then wait for its
 * allocations to end).
 */
export interface LaunchSandboxReporter {
  launchesSandboxed(): boolean;
}

/** The backend's answer of the moment; false for a backend that does not say. */
export function launchesSandboxed(backend: AllocationBackend): boolean {
  return backend.capabilities.launchSandbox?.launchesSandboxed() ?? false;
}

/**
 * Capability `batchGate`: why a BATCH may not be placed now, or null. A daemon whose jobs
 * would run as its own uid with no verified sandbox refuses BATCH as it refuses SESSION: such
 * a job reads the daemon's admin token and database (issue 18). Asked at admission and before
 * each BATCH attempt is prepared; a backend that does not say places BATCH.
 */
export interface BatchPlacementGate {
  batchRefusal(): string | null;
}

/** The backend's refusal of BATCH, or null when it places BATCH (or does not say). */
export function batchRefusal(backend: AllocationBackend): string | null {
  return backend.capabilities.batchGate?.batchRefusal() ?? null;
}

/** One variable a backend will not give a job, and why (the message names it). */
export interface JobEnvRefusal {
  readonly name: string;
  readonly message: string;
}

/**
 * Capability `jobEnv`: the backend's own rules for a job's environment, beyond the
 * project-wide ones (env-policy.ts). A batch system reads variables of its own inside the
 * job (its option and task-layout variables), and a value may be re-read as a list by a site
 * wrapper. Asked at admission, so a refusal is a 400 naming the variable, and again by the
 * launch wrapper before the environment moves onto the launch line, where the backend no
 * longer sees it.
 */
export interface JobEnvironmentPolicy {
  /** Every variable of `env` this backend refuses; empty when it accepts them all. */
  jobEnvRefusals(env: Readonly<Record<string, string>>): readonly JobEnvRefusal[];
}

/**
 * Asks the backend's isolation capability, folding "missing", "Unverified" and "threw" into
 * one refusal. Callers must not distinguish them: all three mean no SESSION.
 */
export async function sessionIsolationVerdict(
  backend: AllocationBackend,
): Promise<IsolationVerdict> {
  const provider = backend.capabilities.sessionIsolation;
  if (provider === null) {
    return { kind: "Unverified", message: `backend ${backend.name} does not isolate sessions` };
  }
  try {
    const verdict = await provider.verifySessionIsolation();
    if (verdict?.kind === "Verified") return verdict;
    return {
      kind: "Unverified",
      message: verdict?.kind === "Unverified" ? verdict.message : "isolation check gave no verdict",
    };
  } catch (error) {
    return { kind: "Unverified", message: `isolation check failed: ${String(error)}` };
  }
}
