/**
 * Everything the API reaches, injected by `createApp(deps)`: no handler opens a database,
 * picks a backend or reads the wall clock on its own, so tests build an app over a
 * temporary store and a fake backend and call `app.request()`.
 */

import type { DaemonMetrics } from "../../adapters/metrics/daemon-metrics.ts";
import type { ProcessFigures } from "../../adapters/metrics/process-figures.ts";
import type { StoreDeps } from "../../adapters/store-sqlite/deps.ts";
import type { AccountLookup } from "../../core/accounts.ts";
import type { WatchedHealth } from "../../core/backend-health.ts";
import type { StateLayout } from "../../core/layout.ts";
import type { Allocation, Workload } from "../../core/models.ts";
import type { AdmissionStore, AttemptIds } from "../../core/ports/admission-store.ts";
import type { AllocationBackend } from "../../core/ports/allocation-backend.ts";
import type { SiteIdentity } from "../../core/ports/site-identity.ts";
import type { Caller, PrincipalLimits } from "../../core/principals.ts";
import type { JupyterService } from "../../core/session/jupyter-service.ts";
import type { Presence } from "../../core/session/presence.ts";
import type { SessionService } from "../../core/session/session-port.ts";
import type { Clock, Timers } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { BrowserGuardSettings } from "./browser-guard.ts";
import type { SocketHandlers } from "./jupyter/socket.ts";
import type { BreakerState } from "./profiles/profile-view.ts";
import type { CallRateHistory } from "./ui/call-rate-history.ts";
import type { WorkspaceFilesDeps } from "./workloads/workspace-files.ts";

/**
 * What the API reads from the reconciler's last finished tick: a structural subset of the
 * reconciler's own TickReport, so the running reconciler is passed in as it is.
 */
export interface TickFigures {
  /** Epoch milliseconds when the tick started. */
  readonly startedAt: number;
  readonly durationMs: number;
  /** Calls the tick made to the backend, by port operation. */
  readonly backendCalls: Readonly<Record<string, number>>;
  readonly backendCallsTotal: number;
  /** Some backend call answered Unavailable or threw during the tick. */
  readonly backendUnavailable: boolean;
  /** Set when a store failure aborted the tick. */
  readonly error: string | null;
}

/** The slice of the running reconciler the API may touch. */
export interface ReconcilerHandle {
  /** Run a tick soon instead of waiting for the next period (after a submit or cancel). */
  wake(): void;
  /**
   * Ids for a new workload's first attempt, minted with the workload at admission. Absent:
   * workloads are admitted PENDING and the reconciler mints (tests that play the reconciler).
   */
  readonly newAttemptIds?: () => AttemptIds;
  /** A workload was admitted (with its first attempt, or none): submit it now, or wake. */
  admitted(workload: Workload, attempt: Allocation | null): void;
  /** Null until the first tick completed. */
  lastTick(): TickFigures | null;
  /**
   * When the backend last confirmed an allocation's phase (epoch ms), null when not since
   * this process started. Absent: never (a handle that plays the reconciler in tests).
   */
  readonly phaseConfirmedAt?: (allocationId: string) => number | null;
  /** Profiles the backend refused since they last succeeded (open: degraded). Absent: none. */
  readonly profileBreakers?: () => readonly {
    readonly profile: string;
    readonly state: BreakerState;
  }[];
  /**
   * The call watch's witness: degraded the moment a call is slow or failed. Not a verdict:
   * `system/backend-health.ts` joins it with the backend's report.
   */
  backendHealth(): WatchedHealth;
  /** Backend calls per second over the last minute, and in total by port operation. */
  backendCallRate(): {
    readonly perSecond: number;
    readonly totals: Readonly<Record<string, number>>;
  };
}

/** The spool's free space against its low-water mark (apps/daemon/spool-watch.ts). */
export interface SpoolSpaceReport {
  readonly path: string;
  /** Null when statfs failed (then `low` is true: nothing can be placed on an unread spool). */
  readonly freeBytes: number | null;
  readonly totalBytes: number | null;
  readonly lowWaterBytes: number | null;
  /** New submissions are refused with 503 SPOOL_FULL while this holds. */
  readonly low: boolean;
  /** What an admin reads: free space, the mark, what is refused; null when not low. */
  readonly message: string | null;
}

export interface SpoolSpace {
  report(): SpoolSpaceReport;
}

/** A consistent copy of the store, taken while the daemon runs (`POST /v1/backup`). */
export interface StoreBackup {
  /**
   * Writes a consistent, self-contained copy of the store to a new file and returns its
   * path; the caller reads and deletes it.
   */
  snapshot(): string;
  /**
   * Files (that exist now) an operator must keep beside a copy for a restored daemon; a
   * `secret` one (a credential) only where the copy is kept as privately as it.
   */
  keepBeside(): readonly {
    readonly name: string;
    readonly path: string;
    readonly secret: boolean;
  }[];
  /**
   * When the last whole backup left (epoch ms), kept across restarts: a restarted daemon
   * that forgot it showed no backup age at all, and the stale-backup alert could not fire.
   */
  lastTakenAt(): number | null;
  recordTaken(atMs: number): void;
}

export interface ApiDeps {
  readonly store: StoreDeps;
  /** Admission's port (core/admission.ts), bound by the composition. */
  readonly admission: AdmissionStore;
  readonly backend: AllocationBackend;
  readonly reconciler: ReconcilerHandle;
  readonly clock: Clock;
  /** Every wait of the HTTP doors (keepalives, deadlines, the Jupyter hub's guard). */
  readonly timers: Timers;
  readonly log: Log;
  /** Where a job's output files are (`GET /v1/workloads/{id}/logs`). */
  readonly logFile: StateLayout["jobLogPath"];
  /** How often a followed log is checked for growth (default 250 ms). */
  readonly logPollMs?: number;
  readonly backup: StoreBackup;
  /** Where workspaces are and who owns them (`/v1/workloads/{id}/files`). */
  readonly files: WorkspaceFilesDeps;
  /** When a user counts as present, for every door (core/session/presence.ts). */
  readonly presence: Presence;
  /** Absent when sessions are not enabled: exec then answers 409. */
  readonly sessions?: SessionService;
  /** Absent when sessions are not enabled: the Jupyter routes answer 409. */
  readonly jupyter?: JupyterService;
  /**
   * Registers what must happen as the daemon stops, before its listeners drain: open
   * websockets are closed (clients reconnect to the next daemon) rather than waited for.
   */
  readonly onDaemonStop?: (close: () => void) => void;
  /** Scheduler calls sampled by the daemon for the cluster page; absent: not recorded. */
  readonly schedulerCallHistory?: CallRateHistory;
  /** New workload ids; injectable so tests can force collisions or fixed ids. */
  readonly newWorkloadId?: () => string;
  /**
   * The daemon's isolation settings, for /v1/diagnostics and /metrics. Absent: nothing
   * unsandboxed allowed (tests that build an app without a daemon).
   */
  readonly isolation?: IsolationSettings;
  /** How long /v1/diagnostics waits for the backend before reporting it unhealthy. */
  readonly diagnosticsTimeoutMs?: number;
  /** The spool's room; absent in tests that do not care (nothing is refused for space). */
  readonly spool?: SpoolSpace;
  /** The state dir's room (the store, the backends' records): 503 STATE_DIR_FULL below it. */
  readonly stateDirSpace?: SpoolSpace;
  readonly version: string;
  /** The daemon's instruments (the composition shares them); absent: the app keeps its own. */
  readonly metrics?: DaemonMetrics;
  /** CPU, memory and descriptors of this process for /metrics; absent: not rendered. */
  readonly processFigures?: () => ProcessFigures;
  /** Limits a new principal gets when `principal add` names none (`serve --principal-max-*`). */
  readonly principalDefaults?: PrincipalLimits;
  /**
   * The site's accounts and the lowest uid work may run as: `principal add` refuses a unix
   * user the core rule (accounts.ts) refuses. Absent: unchecked (tests without accounts).
   */
  readonly accounts?: { readonly lookup: AccountLookup; readonly minUid: number };
  /** Hosts and origins allowed beyond loopback (browser-guard.ts); absent: loopback only. */
  readonly browserGuard?: BrowserGuardSettings;
  /** Where state-changing requests are recorded; absent: not recorded (tests). */
  readonly audit?: AuditLog;
  /** Sign-in through the site (OIDC tokens, MUNGE); absent: only the project's own tokens. */
  readonly siteIdentity?: SiteIdentity;
}

/** One state-changing request, as the audit log keeps it. */
export interface AuditEntry {
  /** ISO 8601. */
  readonly at: string;
  /** `admin`, a principal's name, or null when the request was not authenticated. */
  readonly principal: string | null;
  /** A principal's token id (never the token); null for the admin and the socket. */
  readonly tokenId: string | null;
  /** Method and route pattern: `POST /v1/workloads/:id/cancel`. */
  readonly action: string;
  readonly workload: string | null;
  /** The HTTP status answered. */
  readonly status: number;
  /** `unix` or the TCP client's address. */
  readonly peer: string;
}

export interface AuditQuery {
  readonly sinceMs?: number;
  readonly principal?: string;
  /** The newest this many. */
  readonly limit: number;
}

export interface AuditLog {
  append(entry: AuditEntry): void;
  /** Matching entries, oldest first. */
  read(query: AuditQuery): readonly AuditEntry[];
}

/** What the admin chose about isolation at start, shown to operators. */
export interface IsolationSettings {
  /** `serve --allow-unsandboxed-batch` was given. */
  readonly unsandboxedBatchAllowed: boolean;
  /** Who jobs run as, in words (a leased uid range, one named account, the daemon's uid). */
  readonly jobIdentity: string;
}

/**
 * How the listener that received a request authenticates it, passed per request as Hono's
 * `env` (`app.fetch(request, bindings)`). A unix socket's file mode is its access control;
 * a TCP listener needs the admin token. A request with no bindings is refused: a listener
 * that forgot to say how it authenticates must fail closed, not open.
 */
export type Access =
  | { readonly kind: "LocalSocket" }
  | {
      readonly kind: "Bearer";
      readonly token: string;
      /**
       * A users' socket (`serve --users-socket`): open to every local user, so nothing is
       * granted by its file mode; callers prove themselves (MUNGE, a token). A MUNGE
       * credential presented on it must be bound to this path. Absent: a TCP listener.
       */
      readonly socketPath?: string;
    };

export interface ApiBindings {
  readonly access: Access;
  /** How long this listener waits for a request body (default DEFAULT_BODY_TIMEOUT_MS). */
  readonly bodyTimeoutMs?: number;
  /** The client's address, for the audit log; absent: a unix socket. */
  readonly peerOf?: (request: Request) => string | null;
  /**
   * Turns the request into a websocket served by `handlers` (Bun's `server.upgrade`); false
   * when it is no websocket request. Absent: the listener serves no websockets.
   */
  readonly upgrade?: (request: Request, handlers: SocketHandlers) => boolean;
}

export interface ApiVariables {
  /** Who is calling, set by authentication before any route runs. */
  caller: Caller;
  /**
   * The workload a request created (or replayed), for the audit line: its id is in no path,
   * and without it the audit log alone could not say who created a workload.
   */
  createdWorkload?: string;
  /** The app's timers (ApiDeps.timers), for helpers that see only the context (body reads). */
  apiTimers: Timers;
}

export interface ApiEnv {
  // Hono's Env wants a mutable index-free record; the bindings are read-only in practice.
  Bindings: ApiBindings;
  Variables: ApiVariables;
}
