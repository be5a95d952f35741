/**
 * What a backend can do beyond the port's calls, as one record on the port
 * (`AllocationBackend.capabilities`): each capability stands alone and has its own field;
 * null says the backend has not got it, and callers say so instead of faking it.
 */
import type { SubmissionToken } from "../models.ts";
import type { LaunchSubject } from "../sandbox.ts";
import type {
  AllocationBackend,
  AllocationObservation,
  ObservationTarget,
} from "./allocation-backend.ts";

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
  /**
   * True while the backend does not know yet whether it will sandbox (a cluster's first probe
   * of its nodes still running): work that needs the sandbox waits instead of failing.
   * Absent: the backend always knows (the local one checks at start).
   */
  sandboxPending?(): boolean;
}

/** The backend's answer of the moment; false for a backend that does not say. */
export function launchesSandboxed(backend: AllocationBackend): boolean {
  return backend.capabilities.launchSandbox?.launchesSandboxed() ?? false;
}

/** Whether the backend's sandbox verdict is still to come; false for one that does not say. */
export function sandboxPending(backend: AllocationBackend): boolean {
  return backend.capabilities.launchSandbox?.sandboxPending?.() ?? false;
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
