/**
 * The composition root: the one module outside src/orchestration/slurm/ that may name the
 * scheduler, because it is where backends are chosen and wired. Everything else talks to the
 * AllocationBackend port. (INV-2: the leak guard exempts this file by name.)
 *
 * Sections are owned by different parts of the daemon; keep edits surgical.
 */

import { realpathSync } from "node:fs";
import { dirname, isAbsolute, join } from "node:path";
import type { Clock } from "./clock.ts";
import type { FaultPoints } from "./fault-point.ts";
import type { Log } from "./log.ts";
import {
  createBackgroundVerifier,
  type VerifierSchedule,
} from "./orchestration/isolation/background-verifier.ts";
import { createBubblewrapSandbox } from "./orchestration/isolation/bubblewrap.ts";
import { plainWrapper } from "./orchestration/isolation/launch-argv.ts";
import {
  locateInStateDir,
  sandboxedBackend,
  verifyThroughBackend,
  wrappedBackend,
} from "./orchestration/isolation/through-backend.ts";
import type { StateLayout } from "./orchestration/layout.ts";
import { createLocalBackend, LOCAL_BACKEND_NAME } from "./orchestration/local/backend.ts";
import { localProfiles } from "./orchestration/local/profiles.ts";
import { rewriteRecordPaths } from "./orchestration/local/records.ts";
import type { ResourceProfile, SubmissionToken } from "./orchestration/models.ts";
import {
  type AllocationBackend,
  type IsolationVerdict,
  isTaskRunner,
  type LaunchSandboxReporter,
  type OrphanPolicy,
  type SessionIsolationProvider,
  type TaskRunner,
} from "./orchestration/ports.ts";
import type { RunAs, Sandbox } from "./orchestration/sandbox.ts";
import {
  createSlurmBackend,
  DEFAULT_JOB_PATH,
  type PlacementCatalog,
  RANK_ENV as SLURM_RANK_ENV,
} from "./orchestration/slurm/backend.ts";
import { DEADLINE_ENV } from "./orchestration/slurm/batch-script.ts";
import { createSlurmBroker } from "./orchestration/slurm/broker.ts";
import { createOrphanSweeper, loadOwnerId } from "./orchestration/slurm/orphan-sweeper.ts";
import { formatRefusal, loadClusterConfig } from "./orchestration/slurm/profiles.ts";
import {
  createSbatchTestRun,
  preflightProfiles,
  type SbatchTestRun,
} from "./orchestration/slurm/profiles-preflight.ts";
import { hiddenNamesOf, withPublicMessages } from "./orchestration/slurm/public-messages.ts";
import { WORKER_LISTEN_ENV, workerGatewayListenFromEnv } from "./orchestration/worker-gateway.ts";

// Internal modes of the binary that belong to a backend: the CLI registry reaches them only
// through here, so no module outside this file imports a backend package.
export { superviseCommand } from "./orchestration/local/supervise-command.ts";

// ---------------------------------------------------------------------------------------
// Backend registry (`openai4s serve --backend NAME`). Adding a backend is adding one entry:
// `serve --help`, the validation of --backend and the daemon all read this table.
// ---------------------------------------------------------------------------------------

/** Everything a backend may be built from; the daemon fills it once at start. */
export interface BackendContext {
  readonly layout: StateLayout;
  /** `--cluster-config FILE`, resolved to an absolute path; null when not given. */
  readonly clusterConfigPath: string | null;
  /** How to re-invoke this binary (src/self-command.ts). */
  readonly selfCommand: readonly string[];
  readonly clock: Clock;
  readonly log: Log;
  /** The daemon's environment (PATH, HOME and LANG for local jobs). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Crash-test fault points, read from the environment once by the daemon. */
  readonly faults: FaultPoints;
  /**
   * The unprivileged identity every job runs as (`serve --run-as`); null when the daemon is
   * not root (jobs keep its uid, in a user namespace when sandboxed).
   */
  readonly runAs: RunAs | null;
  /** When background isolation probes run (tests fire them by hand); default: timers. */
  readonly isolationSchedule?: VerifierSchedule;
  /** The tokens among these that have an allocation row (the orphan sweep's one store query). */
  readonly knownTokens?: (tokens: readonly SubmissionToken[]) => ReadonlySet<string>;
}

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

export interface BackendEntry {
  /** One line for `serve --help`. */
  readonly describe: string;
  /**
   * The spool must be named (`--spool-dir`): the nodes must share it, and a default beside
   * the private dir on the daemon's local disk would not be shared.
   */
  readonly requiresSpoolDir?: boolean;
  create(context: BackendContext): Promise<BackendCreation>;
}

export const DEFAULT_BACKEND = LOCAL_BACKEND_NAME;

export const BACKENDS: Readonly<Record<string, BackendEntry>> = {
  [LOCAL_BACKEND_NAME]: {
    describe:
      "this machine: jobs run as local process groups, in bubblewrap when it verifies; SESSIONs too with the worker gateway on",
    async create(context) {
      if (context.clusterConfigPath !== null) {
        return {
          kind: "ConfigError",
          message: `--cluster-config is for a cluster backend; the ${LOCAL_BACKEND_NAME} backend takes none`,
        };
      }
      const configured = localProfiles(context.env);
      if (configured.kind === "ConfigError") return configured;
      const options = {
        profiles: configured.profiles,
        backendDir: context.layout.backendDir(LOCAL_BACKEND_NAME),
        selfCommand: context.selfCommand,
        clock: context.clock,
        log: context.log,
        hostEnv: context.env,
        faults: context.faults,
        runAs: context.runAs,
      };
      const isolation = await localSessionIsolation(context);
      let backend: AllocationBackend;
      switch (isolation.kind) {
        case "Sessions":
          backend = verifiedInBackground(
            context,
            createLocalBackend({ ...options, sandbox: isolation.sandbox }),
            isolation.sandbox,
          );
          break;
        case "SandboxOnly":
          // BATCH still runs in the sandbox: the private dir and other workloads stay hidden.
          backend = withoutSessionIsolation(
            createLocalBackend({ ...options, sandbox: isolation.sandbox }),
            isolation.message,
          );
          break;
        case "Unavailable":
          backend = withoutSessionIsolation(createLocalBackend(options), isolation.message);
          break;
        default: {
          const never: never = isolation;
          throw new Error(`unhandled isolation ${JSON.stringify(never)}`);
        }
      }
      return { kind: "Created", backend };
    },
  },
  // The Slurm backend (slurm backend's section). Jobs go through sbatch/squeue/sacct/scancel/
  // srun found on the daemon's PATH, with SLURM_CONF passed through when set; nothing else of
  // the daemon's environment reaches them or the jobs. Session isolation (bubblewrap on the
  // launch line, verified on the nodes) is added by the sessions engine's section below.
  slurm: {
    requiresSpoolDir: true,
    describe:
      "a Slurm cluster through sbatch/squeue/sacct on PATH (SLURM_CONF honoured); needs --cluster-config FILE and --spool-dir DIR",
    async create(context) {
      if (context.clusterConfigPath === null) {
        return {
          kind: "ConfigError",
          message: "the slurm backend needs --cluster-config FILE (see cluster.toml.example)",
        };
      }
      const placements = loadClusterPlacements(context.clusterConfigPath);
      if (placements.kind === "ConfigError") return placements;
      const slurmConf = context.env["SLURM_CONF"];
      const broker = createSlurmBroker({
        path: context.env["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
        ...(slurmConf === undefined || slurmConf === "" ? {} : { slurmConf }),
      });
      const sweep = orphanSweepFromEnv(context.env);
      if (sweep.kind === "ConfigError") return sweep;
      let ownerId: string;
      try {
        ownerId = loadOwnerId(context.layout.backendDir("slurm"));
      } catch (error) {
        return { kind: "ConfigError", message: `the daemon's owner id: ${String(error)}` };
      }
      const knownTokens = context.knownTokens;
      const sweeper =
        knownTokens === undefined
          ? null
          : createOrphanSweeper({
              broker,
              ownerId,
              uid: process.getuid?.() ?? 0,
              policy: sweep.policy,
              intervalMs: sweep.intervalSeconds * 1000,
              knownTokens,
              clock: context.clock,
              log: context.log,
            });
      // Scheduler text reaches workload messages and the API: rewritten so no partition,
      // QoS or account name leaves the daemon (the log keeps the original).
      // The isolation probe's backend carries no owner id: its jobs have no allocation row,
      // and the orphan sweep must never report or cancel a probe that is running.
      const build = (catalog: PlacementCatalog, owned: boolean) =>
        withPublicMessages(
          createSlurmBackend({
            broker,
            placements: catalog,
            clock: context.clock,
            log: context.log,
            ...(owned ? { ownerId } : {}),
            ...(owned && sweeper !== null ? { orphanReport: () => sweeper.report() } : {}),
          }),
          hiddenNamesOf(placements.catalog),
        );
      const slurmBackend = build(placements.catalog, true);
      // Sessions engine's wiring: the sandbox on the launch line, verified on the nodes by a
      // probe on its own smallest placement (a backend over a one-entry catalog).
      const probeBackend = (derive: (catalog: PlacementCatalog) => PlacementCatalog) =>
        build(derive(placements.catalog), false);
      return {
        kind: "Created",
        backend: await withClusterSessionIsolation(context, slurmBackend, probeBackend),
        ...(sweeper === null ? {} : { services: [sweeper] }),
      };
    },
  },
};

/** `OPENAI4S_ORPHAN_POLICY`: what the orphan sweep does with a job that has no row. */
export const ORPHAN_POLICY_ENV = "OPENAI4S_ORPHAN_POLICY";
/** `OPENAI4S_ORPHAN_SWEEP_SECONDS`: how often it sweeps (it also sweeps at start). */
export const ORPHAN_SWEEP_SECONDS_ENV = "OPENAI4S_ORPHAN_SWEEP_SECONDS";
const DEFAULT_ORPHAN_SWEEP_SECONDS = 300;

function orphanSweepFromEnv(
  env: Readonly<Record<string, string | undefined>>,
):
  | { readonly kind: "Sweep"; readonly policy: OrphanPolicy; readonly intervalSeconds: number }
  | { readonly kind: "ConfigError"; readonly message: string } {
  const policy = env[ORPHAN_POLICY_ENV] ?? "report";
  if (policy !== "report" && policy !== "cancel") {
    return { kind: "ConfigError", message: `${ORPHAN_POLICY_ENV} must be report or cancel` };
  }
  const rawSeconds = env[ORPHAN_SWEEP_SECONDS_ENV];
  const intervalSeconds =
    rawSeconds === undefined || rawSeconds === ""
      ? DEFAULT_ORPHAN_SWEEP_SECONDS
      : Number(rawSeconds);
  if (!Number.isInteger(intervalSeconds) || intervalSeconds < 1 || intervalSeconds > 86_400) {
    return {
      kind: "ConfigError",
      message: `${ORPHAN_SWEEP_SECONDS_ENV} must be a whole number of seconds in 1..86400`,
    };
  }
  return { kind: "Sweep", policy, intervalSeconds };
}

// ---------------------------------------------------------------------------------------
// Session isolation for the local backend (sessions engine's section).
//
// Sessions need the worker gateway (OPENAI4S_WORKER_LISTEN) and a VERIFIED per-allocation
// sandbox. Whenever the sandbox verifies, it wraps EVERY local launch, BATCH included and
// whether or not the gateway is on: a BATCH job outside it could read a session's credential
// and workspace, and the daemon's own files. When bubblewrap does not verify, BATCH still
// runs (it never requires the capability), never as root (RunAs), and SESSION is refused.
// Either way the backend answers the isolation question with the precise reason, so
// admission refuses with ISOLATION_UNAVAILABLE and a message saying what to fix. The
// decision is taken once, at start: turning the sandbox on for BATCH is a restart.
// ---------------------------------------------------------------------------------------

/** Where `bwrap` is (default: PATH). Tests point it at a missing file to take isolation away. */
export const BWRAP_ENV = "OPENAI4S_BWRAP";

type LocalSessionIsolation =
  /** A verified sandbox and the gateway on: sessions and every launch sandboxed. */
  | { readonly kind: "Sessions"; readonly sandbox: Sandbox }
  /** A verified sandbox for every launch, but no sessions (why in `message`). */
  | { readonly kind: "SandboxOnly"; readonly sandbox: Sandbox; readonly message: string }
  | { readonly kind: "Unavailable"; readonly message: string };

/**
 * The sandbox is verified whether or not sessions are on: a plain BATCH job outside it ran
 * with the daemon's private dir and every other workspace reachable (issue 8). BATCH never
 * requires it: without bubblewrap, jobs still run, unsandboxed.
 */
async function localSessionIsolation(context: BackendContext): Promise<LocalSessionIsolation> {
  const sandbox = bubblewrapFor(context);
  const verdict = await sandbox.verify();
  const gatewayOn = workerGatewayListenFromEnv(context.env).kind === "Enabled";
  switch (verdict.kind) {
    case "Verified":
      return gatewayOn
        ? { kind: "Sessions", sandbox }
        : { kind: "SandboxOnly", sandbox, message: GATEWAY_OFF_MESSAGE };
    case "Unverified":
      context.log.warn("no verified sandbox: jobs run unsandboxed", { detail: verdict.message });
      return {
        kind: "Unavailable",
        message: gatewayOn
          ? `sessions need a verified per-allocation sandbox: ${verdict.message}`
          : GATEWAY_OFF_MESSAGE,
      };
    default: {
      const never: never = verdict;
      throw new Error(`unhandled isolation verdict ${JSON.stringify(never)}`);
    }
  }
}

/** How often the local sandbox is re-verified, in the background. */
const LOCAL_ISOLATION_INTERVAL_MS = 60 * 1000;

/**
 * The local backend's isolation answer, re-verified in the background: the sandbox's own
 * verify() probes again when its cache expires, which put a bwrap run (up to 10 s) inside
 * whichever HTTP request or reconciler tick asked next (issue 8). Seeded with the verdict of
 * the start-up check, so the daemon never answers "not verified yet" once it listens.
 */
function verifiedInBackground(
  context: BackendContext,
  backend: AllocationBackend,
  sandbox: Sandbox,
): AllocationBackend {
  const verifier = createBackgroundVerifier({
    probe: () => sandbox.verify(),
    log: context.log,
    seed: { kind: "Verified", mechanism: sandbox.mechanism },
    verifiedIntervalMs: LOCAL_ISOLATION_INTERVAL_MS,
    retryIntervalMs: LOCAL_ISOLATION_INTERVAL_MS,
  });
  verifier.start();
  const verifySessionIsolation = async (): Promise<IsolationVerdict> => verifier.current();
  return { ...backend, verifySessionIsolation } as AllocationBackend;
}

const GATEWAY_OFF_MESSAGE = `sessions are not enabled on this daemon: the worker gateway is off (set ${WORKER_LISTEN_ENV}=HOST:PORT)`;

/** The sandbox every backend's launches run in, masking the state dir. */
function bubblewrapFor(context: BackendContext): Sandbox {
  const bwrapPath = context.env[BWRAP_ENV];
  return createBubblewrapSandbox({
    ...(bwrapPath !== undefined && bwrapPath !== "" ? { bwrapPath } : {}),
    runAs: context.runAs,
    log: context.log,
    // The private dir holds the database, the signing key and the admin token; the spool
    // every other workload's files. Only the launch's own directories are bound back.
    maskedRoots: [context.layout.root, context.layout.spool],
    // The worker is this program: its binary's directory (a wrapper in front of it, as tests
    // use, must still find it), and from source (`bun src/main.ts`) the project as well.
    readOnlyExtra: selfDirectories(context.selfCommand),
  });
}

function selfDirectories(selfCommand: readonly string[]): readonly string[] {
  const [program, entry] = selfCommand;
  const dirs: string[] = [];
  if (program !== undefined && isAbsolute(program)) {
    dirs.push(dirname(program));
    try {
      dirs.push(dirname(realpathSync(program)));
    } catch {
      // A binary that vanished: the launch fails visibly, nothing to bind.
    }
  }
  if (entry !== undefined && isAbsolute(entry)) dirs.push(dirname(dirname(entry)));
  return [...new Set(dirs)];
}

/** After a Verified verdict on the nodes, the next background probe in this long. */
const CLUSTER_ISOLATION_TTL_MS = 10 * 60 * 1000;
/**
 * After an Unverified or inconclusive probe, the next one in this long. Most Unverified
 * verdicts at start are an outage (controller down, slurm.conf mid-edit), not a node
 * without bwrap: kept for the daemon's lifetime, they switched sessions off until someone
 * restarted it.
 */
export const CLUSTER_ISOLATION_RETRY_MS = 60 * 1000;
/** The probe job's own time limit: it runs for seconds; the shortest a partition takes. */
const PROBE_JOB_TIME_LIMIT_SECONDS = 60;
/** The name the probe's private placement goes by (never offered to anyone). */
const PROBE_PROFILE = "isolation-probe";

/**
 * The smallest placement the session profile's partition accepts, for the probe: the same
 * partition, QoS and account (the probe must land where sessions land), one node, one CPU,
 * no GPUs, the cluster's default memory and a one-minute limit. A probe with the session
 * profile's full placement took GPUs every 10 minutes (issue 8).
 */
function probePlacements(catalog: PlacementCatalog, sessionProfile: string): PlacementCatalog {
  const base = catalog.placement(sessionProfile);
  return {
    profiles: () => [],
    placement: (name) =>
      name === PROBE_PROFILE && base !== null
        ? {
            ...base,
            nodes: 1,
            cpus: 1,
            gpus: 0,
            memoryMb: null,
            timeLimitSeconds: PROBE_JOB_TIME_LIMIT_SECONDS,
          }
        : null,
  };
}

/**
 * A cluster backend with sessions: the same policy as the local one, except that the sandbox
 * is verified ON THE NODES, by a probe allocation submitted through the backend itself (a
 * check on the daemon's host says nothing about a node without bwrap), and it is put on the
 * launch line by wrapping the backend (isolation/through-backend.ts), steps included. The
 * probe lays its two sibling allocations out in the spool, which the nodes share.
 *
 * Verification runs in the background (background-verifier.ts): at start, without holding
 * the start up, then every 10 minutes (every minute while unverified). Admission and attempt
 * preparation read the last verdict and never wait for a probe.
 */
async function withClusterSessionIsolation(
  context: BackendContext,
  backend: AllocationBackend,
  probeBackend: (placements: (catalog: PlacementCatalog) => PlacementCatalog) => AllocationBackend,
): Promise<AllocationBackend> {
  const locate = locateInStateDir(context.layout);
  // The batch script exports the job's deadline (runway) before the launch line: copied in.
  const job = {
    rankEnv: SLURM_RANK_ENV,
    baseEnv: { PATH: DEFAULT_JOB_PATH },
    launchEnv: [DEADLINE_ENV],
    locate,
  };
  // Without a verified sandbox every launch still goes through this: never as root, and the
  // job's variables applied after the privilege drop, not handed to the batch script.
  const plain = wrappedBackend(backend, { ...job, wrapper: plainWrapper(context.runAs) });
  const gatewayOn = workerGatewayListenFromEnv(context.env).kind === "Enabled";
  // BATCH is sandboxed whenever the nodes can be shown to sandbox, gateway or not: the probe
  // runs on a SESSION profile when there is one, else on the first profile.
  const profiles = backend.profiles();
  const profile = profiles.find((p) => p.kinds.includes("SESSION")) ?? profiles[0];
  if (profile === undefined) return withoutSessionIsolation(plain, "this cluster has no profile");
  const sessionsOff = !gatewayOn
    ? GATEWAY_OFF_MESSAGE
    : profile.kinds.includes("SESSION")
      ? null
      : "no profile of this cluster offers SESSION";
  const sandbox = bubblewrapFor(context);
  const prober = probeBackend((catalog) => probePlacements(catalog, profile.name));
  const probe = () =>
    verifyThroughBackend({
      backend: prober,
      sandbox,
      probeRoot: join(context.layout.backendSpoolDir(backend.name), "isolation-probe"),
      profile: PROBE_PROFILE,
      jobTimeLimitSeconds: PROBE_JOB_TIME_LIMIT_SECONDS,
      clock: context.clock,
      log: context.log,
    });
  // Launch lines are wrapped in the sandbox only once it has been seen working on the nodes:
  // wrapping BATCH jobs in a bwrap the nodes may not have would fail every one of them.
  let sandboxing = false;
  const verifier = createBackgroundVerifier({
    probe,
    log: context.log,
    ...(context.isolationSchedule ? { schedule: context.isolationSchedule } : {}),
    verifiedIntervalMs: CLUSTER_ISOLATION_TTL_MS,
    retryIntervalMs: CLUSTER_ISOLATION_RETRY_MS,
    onVerdict(verdict) {
      if (verdict.kind === "Verified" && !sandboxing) {
        context.log.info("session isolation verified on the nodes", {
          mechanism: verdict.mechanism,
        });
        sandboxing = true;
      } else if (verdict.kind === "Unverified") {
        context.log.warn("session isolation unavailable on the nodes; probed again later", {
          detail: verdict.message,
        });
      }
    },
  });
  verifier.start();
  const verify = async (): Promise<IsolationVerdict> => {
    if (sessionsOff !== null) return { kind: "Unverified", message: sessionsOff };
    const verdict = verifier.current();
    return verdict.kind === "Unverified"
      ? {
          kind: "Unverified",
          message: `sessions need a verified per-allocation sandbox on the nodes: ${verdict.message}`,
        }
      : verdict;
  };
  const sandboxed = sandboxedBackend(backend, { ...job, wrapper: sandbox, verify });
  const current = (): AllocationBackend => (sandboxing ? sandboxed : plain);
  const switching: AllocationBackend & SessionIsolationProvider & LaunchSandboxReporter = {
    name: backend.name,
    profiles: () => backend.profiles(),
    launchesSandboxed: () => sandboxing,
    submit: (requests) => current().submit(requests),
    observe: (targets) => backend.observe(targets),
    cancel: (targets) => backend.cancel(targets),
    findByToken: (tokens) => backend.findByToken(tokens),
    diagnostics: () => backend.diagnostics(),
    verifySessionIsolation: verify,
  };
  if (!isTaskRunner(backend)) return switching;
  const runner: TaskRunner = {
    runTask(target, command, options) {
      const chosen = current();
      if (isTaskRunner(chosen)) return chosen.runTask(target, command, options);
      // Unreachable (both wrappers keep runTask when the backend has it); never unwrapped.
      return Promise.resolve({ kind: "Refused", message: "steps are not available" });
    },
  };
  return { ...switching, ...runner };
}

/** The backend, answering the isolation question with why not (never Verified). */
function withoutSessionIsolation(
  backend: AllocationBackend,
  message: string,
): AllocationBackend & SessionIsolationProvider {
  return {
    ...backend,
    verifySessionIsolation: async (): Promise<IsolationVerdict> => ({
      kind: "Unverified",
      message,
    }),
  };
}

/**
 * The state-dir split (issue 8) moved the workloads' files from `fromPrefix` to `toPrefix`:
 * each backend's durable records that name paths are rewritten to follow. Only the local
 * backend keeps such records; a cluster's running jobs follow the rename by inode.
 */
export function migrateBackendRecords(
  layout: StateLayout,
  fromPrefix: string,
  toPrefix: string,
): void {
  rewriteRecordPaths(layout.backendDir(LOCAL_BACKEND_NAME), fromPrefix, toPrefix);
}

export function backendNames(): readonly string[] {
  return Object.keys(BACKENDS);
}

export async function createBackend(
  name: string,
  context: BackendContext,
): Promise<BackendCreation> {
  const entry = Object.hasOwn(BACKENDS, name) ? BACKENDS[name] : undefined;
  if (!entry) {
    return {
      kind: "ConfigError",
      message: `unknown backend "${name}" (known: ${backendNames().join(", ")})`,
    };
  }
  return entry.create(context);
}

// ---------------------------------------------------------------------------------------
// Cluster configuration (cluster.toml): `openai4s check-config FILE [--preflight]`, and
// the profiles a cluster backend is built from (`serve --cluster-config FILE`). Owned by
// the cluster.toml work. The check-config command names no scheduler: every word about
// where a profile lands comes from the backend package (describeMapping, the preflight
// details) and is only passed through here.
// ---------------------------------------------------------------------------------------

export interface CheckedProfile {
  /** The public view: what `GET /v1/profiles` shows. */
  readonly view: ResourceProfile;
  /** Where it lands, in the backend's words, one string per output line. */
  readonly mapping: readonly string[];
}

export type ConfigCheck =
  | { readonly kind: "Valid"; readonly profiles: readonly CheckedProfile[] }
  /** `FILE:LINE:COLUMN: message` (column when known) for the first problem in the file. */
  | { readonly kind: "Invalid"; readonly problem: string }
  | { readonly kind: "Unreadable"; readonly problem: string };

export interface ConfigPreflight {
  readonly profile: string;
  readonly outcome: "POSSIBLE" | "IMPOSSIBLE" | "UNANSWERED";
  readonly detail: string;
}

/** `displayName` is the FILE printed in problems (what the admin typed). */
export function checkClusterConfig(path: string, displayName: string = path): ConfigCheck {
  const loaded = loadClusterConfig({ path });
  switch (loaded.kind) {
    case "Loaded":
      return {
        kind: "Valid",
        profiles: loaded.profiles.map((p) => ({ view: p.public(), mapping: p.describeMapping() })),
      };
    case "Refused":
      return { kind: "Invalid", problem: formatRefusal(displayName, loaded) };
    case "Unreadable":
      return { kind: "Unreadable", problem: `${displayName}: ${loaded.message}` };
    default: {
      const never: never = loaded;
      throw new Error(`unhandled load ${JSON.stringify(never)}`);
    }
  }
}

/**
 * One `--test-only` submission per profile of an already checked file, through the
 * scheduler's clients on `env.PATH` (and `env.SLURM_CONF` when set). Null when the file no
 * longer loads.
 */
export async function preflightClusterConfig(
  path: string,
  env: Readonly<Record<string, string | undefined>>,
  run?: SbatchTestRun,
): Promise<readonly ConfigPreflight[] | null> {
  const loaded = loadClusterConfig({ path });
  if (loaded.kind !== "Loaded") return null;
  const slurmConf = env["SLURM_CONF"];
  const sbatch =
    run ??
    createSbatchTestRun({
      path: env["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
      ...(slurmConf === undefined || slurmConf === "" ? {} : { slurmConf }),
    });
  return preflightProfiles(loaded.profiles, sbatch);
}

/** For a cluster backend's entry: the placement catalog, or the message `serve` exits 2 with. */
export function loadClusterPlacements(
  path: string,
):
  | { readonly kind: "Loaded"; readonly catalog: PlacementCatalog }
  | { readonly kind: "ConfigError"; readonly message: string } {
  const loaded = loadClusterConfig({ path });
  switch (loaded.kind) {
    case "Loaded":
      return { kind: "Loaded", catalog: loaded.catalog };
    case "Refused":
      return { kind: "ConfigError", message: formatRefusal(path, loaded) };
    case "Unreadable":
      return { kind: "ConfigError", message: `${path}: ${loaded.message}` };
    default: {
      const never: never = loaded;
      throw new Error(`unhandled load ${JSON.stringify(never)}`);
    }
  }
}
