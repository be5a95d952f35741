/**
 * The backend plugin port: everything a backend declares so the daemon, the CLI and the
 * guards can use it without naming it. A backend is one folder under src/adapters/ with a
 * `plugin.ts` exporting one of these, and one line in the daemon's list of backends
 * (apps/daemon/composition/backends.ts). The failure it replaces: adding a backend meant
 * about nine files outside its folder (its hand wiring in the registry, check-config calling
 * its check directly, the guards' lists), and the flag parser reading the registry while the
 * registry's context read the parsed flags, a ten-file import circle.
 *
 * What a backend declares: its name and one line for `serve --help`, its settings (the
 * variables it reads, parsed once at start with the daemon's others), its config check
 * (`check-config`), the capabilities its bare backend's record holds, its restore helpers,
 * and how it is composed from what the daemon hands every backend (the context below). Its
 * probe placements are part of how it is composed: a backend whose jobs run on nodes hands
 * the isolation policy a probe backend over its own smallest placement (`onNodes`).
 */
import type { Clock } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { AccountDatabase } from "../accounts.ts";
import type { StateLayout } from "../layout.ts";
import type { ResourceProfile, SubmissionToken } from "../models.ts";
import type { JobIdentities, LaunchWrapper, Sandbox } from "../sandbox.ts";
import type { AllocationBackend, OrphanPolicy } from "./allocation-backend.ts";
import type { CapabilityName } from "./backend-capabilities.ts";

/** Something a backend runs beside the reconciler (the orphan sweep), started and stopped with the daemon. */
export interface BackgroundService {
  start(): void;
  stop(): Promise<void>;
}

export type BackendCreation =
  | {
      readonly kind: "Created";
      readonly backend: AllocationBackend;
      readonly services?: readonly BackgroundService[];
    }
  /** A configuration problem the admin must fix: `serve` exits 2 with this message. */
  | { readonly kind: "ConfigError"; readonly message: string };

/** A backend with the daemon's isolation policy applied, and what keeps it verified. */
export interface IsolatedBackend {
  readonly backend: AllocationBackend;
  readonly services: readonly BackgroundService[];
}

/** What a node backend's launch line needs from its scheduler. */
export interface ClusterJobEnv {
  /** The variable the cluster's task launcher sets per task (inherited by WORKERs). */
  readonly rankEnv: string;
  /** The job's base environment (its PATH on the nodes). */
  readonly baseEnv: Readonly<Record<string, string>>;
  /** Names the batch script exports before the launch line, copied into the sandbox. */
  readonly launchEnv: readonly string[];
  /** What each task of a multi-task BATCH inherits from the launcher (its allowlist). */
  readonly taskEnv?: readonly string[];
}

/**
 * The daemon's session isolation policy (one policy, two places a job can run), offered to
 * every backend so that none builds a sandbox or decides when sessions are allowed itself.
 */
export interface SessionIsolationKit {
  /**
   * The launch of a job with no sandbox: who it runs as (the daemon's identities) and a clean
   * environment. A backend is handed it, so no backend builds the sandbox adapter's wrapper.
   */
  readonly plainLaunch: LaunchWrapper;
  /**
   * Jobs run on this machine: the sandbox is verified here, at start. `build` makes the
   * backend with the verified sandbox, or without one (null) when it does not verify.
   */
  onThisMachine(build: (sandbox: Sandbox | null) => AllocationBackend): Promise<IsolatedBackend>;
  /**
   * Jobs run on nodes: the sandbox is put on the launch line once a probe, submitted through
   * `probe(sessionProfile)` (a backend whose `PROBE_PROFILE` is the smallest placement where
   * that profile's sessions land, owning no allocations), has seen it work there.
   */
  onNodes(
    backend: AllocationBackend,
    probe: (sessionProfile: string) => AllocationBackend,
    jobEnv: ClusterJobEnv,
  ): Promise<IsolatedBackend>;
}

/** The isolation probe's own placement name (never offered to anyone). */
export const PROBE_PROFILE = "isolation-probe";
/** The probe job's own time limit: it runs for seconds; the shortest a placement takes. */
export const PROBE_JOB_TIME_LIMIT_SECONDS = 60;

/** Everything a backend may be built from; the daemon fills it once at start. */
export interface BackendPluginContext<Settings> {
  readonly layout: StateLayout;
  /** `--cluster-config FILE`, resolved to an absolute path; null when not given. */
  readonly clusterConfigPath: string | null;
  /** How to re-invoke this binary (src/lib/self-command.ts). */
  readonly selfCommand: readonly string[];
  readonly clock: Clock;
  readonly log: Log;
  /**
   * The daemon's environment as it is passed on to what the daemon starts (PATH, HOME and
   * LANG for local jobs, the cluster client's own variables). Settings are not read from it.
   */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** This backend's own settings, as its `settings.read` parsed them at start. */
  readonly settings: Settings;
  /** Crash-test fault points (lib/fault-point.ts), read from the environment once. */
  readonly faults: { hit(point: string): void };
  /** Who each job runs as: a leased uid per workload, one account, or the daemon's own uid. */
  readonly identities: JobIdentities;
  /** The site's accounts (NSS): who a uid is, for the scheduler to own a job as it. */
  readonly accounts?: AccountDatabase;
  /** The tokens among these that have an allocation row (the orphan sweep's one store query). */
  readonly knownTokens?: (tokens: readonly SubmissionToken[]) => ReadonlySet<string>;
  /** The worker gateway's unix socket when the gateway is on; null: sessions are off. */
  readonly workerSocket: string | null;
  /** What the daemon does with a job it has no row for, and how often it looks. */
  readonly orphanSweep: { readonly policy: OrphanPolicy; readonly intervalSeconds: number };
  /** The daemon's session isolation policy, to apply to the backend being built. */
  readonly isolation: SessionIsolationKit;
}

/** One bad variable, named in its own message. */
export interface SettingProblem {
  readonly variable: string;
  readonly message: string;
}

export type SettingsRead<Settings> =
  | { readonly kind: "Parsed"; readonly settings: Settings }
  | { readonly kind: "Invalid"; readonly errors: readonly SettingProblem[] };

/** A backend's settings: every variable it reads, parsed once at start (checked whether or not it runs). */
export interface BackendSettingsSchema<Settings> {
  /** The variables, for `serve --help` and the docs. */
  readonly variables: readonly string[];
  read(env: Readonly<Record<string, string | undefined>>): SettingsRead<Settings>;
}

/** One profile of a checked config file: the public view and, in the backend's words, where it lands. */
export interface CheckedProfile {
  readonly view: ResourceProfile;
  /** One string per output line. */
  readonly mapping: readonly string[];
}

export type ConfigCheck =
  | {
      readonly kind: "Valid";
      readonly profiles: readonly CheckedProfile[];
      /** What loads but is likely wrong (an example's placeholder names). */
      readonly warnings: readonly { readonly profile: string; readonly text: string }[];
    }
  /** `FILE:LINE:COLUMN: message` for the first problem in the file. */
  | { readonly kind: "Invalid"; readonly problem: string }
  | { readonly kind: "Unreadable"; readonly problem: string };

export interface ConfigPreflight {
  readonly profile: string;
  readonly outcome: "POSSIBLE" | "IMPOSSIBLE" | "UNANSWERED";
  readonly detail: string;
}

/** `openai4s check-config FILE [--preflight]` for a backend that takes a config file. */
export interface BackendConfigCheck {
  check(path: string): ConfigCheck;
  /** Null when the file no longer loads (it changed since `check`). */
  preflight(
    path: string,
    env: Readonly<Record<string, string | undefined>>,
  ): Promise<readonly ConfigPreflight[] | null>;
}

/** A job a restored store does not know, still running (started after the copy). */
export interface UnknownJob {
  readonly token: string;
  readonly workloadId: string;
  readonly allocationId: string;
}

/**
 * What `openai4s restore` and the state-dir migration ask of a backend that keeps durable
 * records of its own jobs in its backend dir (a cluster's jobs live in the scheduler).
 */
export interface BackendRestoreHelpers {
  unknownRunningJobs(backendDir: string, knownTokens: ReadonlySet<string>): readonly UnknownJob[];
  /** Asks each to stop; what could not be asked, one line each. */
  cancelUnknownJobs(
    backendDir: string,
    spoolDir: string,
    jobs: readonly UnknownJob[],
    /** The restore command's clock (system time enters at the program's edge). */
    clock: Clock,
    /** The backend's launch (a cancel starts nothing, but the backend is built whole). */
    plainLaunch: LaunchWrapper,
  ): Promise<readonly string[]>;
  waitUntilEnded(backendDir: string, jobs: readonly UnknownJob[], timeoutMs: number): Promise<void>;
  /** Moves the records of ended unknown jobs aside; their tokens. */
  setAsideEndedUnknownJobs(
    backendDir: string,
    knownTokens: ReadonlySet<string>,
    stamp: string,
  ): readonly string[];
  setAsideDir(backendDir: string, stamp: string): string;
  /** The state-dir split moved workloads' files: records naming paths follow. */
  rewriteRecordPaths(backendDir: string, fromPrefix: string, toPrefix: string): void;
}

export interface BackendPlugin<Settings> {
  /** `serve --backend NAME`, and its dir under the state dir's backends/. */
  readonly name: string;
  /** One line for `serve --help`. */
  readonly describe: string;
  /**
   * The spool must be named (`--spool-dir`): the nodes must share it, and a default beside
   * the private dir on the daemon's local disk would not be shared.
   */
  readonly requiresSpoolDir: boolean;
  readonly settings: BackendSettingsSchema<Settings>;
  /** Null: the backend takes no config file. */
  readonly configCheck: BackendConfigCheck | null;
  /** What its bare backend's record holds (the contract suite holds it to this). */
  readonly capabilities: Readonly<Record<CapabilityName, boolean>>;
  /** Null: it keeps no records of its own jobs. */
  readonly restore: BackendRestoreHelpers | null;
  /**
   * The one module of its folder (a file name in it) that starts the scheduler's client
   * commands, for a backend that drives a scheduler: the guards (INV-2, INV-9) then let its
   * folder name the scheduler and that module alone start its commands. Null: it starts none.
   */
  readonly schedulerBroker: string | null;
  create(context: BackendPluginContext<Settings>): Promise<BackendCreation>;
}

/** A plugin as a list holds it: its settings' type hidden behind the daemon's one parse. */
export interface RegisteredBackend extends Omit<BackendPlugin<unknown>, "create"> {
  create(context: BackendPluginContext<unknown>): Promise<BackendCreation>;
}

/**
 * For the list of backends. The cast is the one place the settings' type is erased: the
 * daemon hands each plugin's `create` the value that plugin's own `settings.read` returned
 * (config.ts keeps it under the plugin's name), never another's.
 */
export function registerBackend<Settings>(plugin: BackendPlugin<Settings>): RegisteredBackend {
  return {
    ...plugin,
    create: (context) => plugin.create(context as BackendPluginContext<Settings>),
  };
}
