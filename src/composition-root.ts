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
import { createBubblewrapSandbox } from "./orchestration/isolation/bubblewrap.ts";
import {
  cachedVerdict,
  locateInStateDir,
  sandboxedBackend,
  verifyThroughBackend,
} from "./orchestration/isolation/through-backend.ts";
import type { StateLayout } from "./orchestration/layout.ts";
import { createLocalBackend, LOCAL_BACKEND_NAME } from "./orchestration/local/backend.ts";
import type { ResourceProfile, SubmissionToken } from "./orchestration/models.ts";
import {
  type AllocationBackend,
  type IsolationVerdict,
  isTaskRunner,
  type OrphanPolicy,
  type SessionIsolationProvider,
  type TaskRunner,
} from "./orchestration/ports.ts";
import type { Sandbox } from "./orchestration/sandbox.ts";
import { createSlurmBackend, type PlacementCatalog } from "./orchestration/slurm/backend.ts";
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
  create(context: BackendContext): Promise<BackendCreation>;
}

export const DEFAULT_BACKEND = LOCAL_BACKEND_NAME;

export const BACKENDS: Readonly<Record<string, BackendEntry>> = {
  [LOCAL_BACKEND_NAME]: {
    describe:
      "this machine: jobs run as local process groups; SESSIONs too with the worker gateway on and bubblewrap verified",
    async create(context) {
      if (context.clusterConfigPath !== null) {
        return {
          kind: "ConfigError",
          message: `--cluster-config is for a cluster backend; the ${LOCAL_BACKEND_NAME} backend takes none`,
        };
      }
      const options = {
        backendDir: context.layout.backendDir(LOCAL_BACKEND_NAME),
        selfCommand: context.selfCommand,
        clock: context.clock,
        log: context.log,
        hostEnv: context.env,
        faults: context.faults,
      };
      const isolation = await localSessionIsolation(context);
      const backend =
        isolation.kind === "Sandbox"
          ? createLocalBackend({ ...options, sandbox: isolation.sandbox })
          : withoutSessionIsolation(createLocalBackend(options), isolation.message);
      return { kind: "Created", backend };
    },
  },
  // The Slurm backend (slurm backend's section). Jobs go through sbatch/squeue/sacct/scancel/
  // srun found on the daemon's PATH, with SLURM_CONF passed through when set; nothing else of
  // the daemon's environment reaches them or the jobs. Session isolation (bubblewrap on the
  // launch line, verified on the nodes) is added by the sessions engine's section below.
  slurm: {
    describe:
      "a Slurm cluster through sbatch/squeue/sacct on PATH (SLURM_CONF honoured); needs --cluster-config FILE",
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
      const slurmBackend = withPublicMessages(
        createSlurmBackend({
          broker,
          placements: placements.catalog,
          clock: context.clock,
          log: context.log,
          ownerId,
          ...(sweeper === null ? {} : { orphanReport: () => sweeper.report() }),
        }),
        hiddenNamesOf(placements.catalog),
      );
      // Sessions engine's wiring: the sandbox on the launch line, verified on the nodes.
      return {
        kind: "Created",
        backend: await withClusterSessionIsolation(context, slurmBackend),
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
// sandbox. When both are there, the bubblewrap sandbox wraps EVERY local launch, BATCH
// included: a BATCH job outside it could read a session's credential and workspace. When the
// gateway is off, nothing is sandboxed and BATCH runs as before (no credential exists to
// protect); when bubblewrap does not verify, BATCH also runs unsandboxed and SESSION is
// refused. Either way the backend answers the isolation question with the precise reason,
// so admission refuses with ISOLATION_UNAVAILABLE and a message saying what to fix. The
// decision is taken once, at start: turning the sandbox on for BATCH is a restart.
// ---------------------------------------------------------------------------------------

/** Where `bwrap` is (default: PATH). Tests point it at a missing file to take isolation away. */
export const BWRAP_ENV = "OPENAI4S_BWRAP";

type LocalSessionIsolation =
  | { readonly kind: "Sandbox"; readonly sandbox: Sandbox }
  | { readonly kind: "Unavailable"; readonly message: string };

async function localSessionIsolation(context: BackendContext): Promise<LocalSessionIsolation> {
  if (workerGatewayListenFromEnv(context.env).kind !== "Enabled") {
    return {
      kind: "Unavailable",
      message: `sessions are not enabled on this daemon: the worker gateway is off (set ${WORKER_LISTEN_ENV}=HOST:PORT)`,
    };
  }
  const sandbox = bubblewrapFor(context);
  const verdict = await sandbox.verify();
  switch (verdict.kind) {
    case "Verified":
      return { kind: "Sandbox", sandbox };
    case "Unverified":
      return {
        kind: "Unavailable",
        message: `sessions need a verified per-allocation sandbox: ${verdict.message}`,
      };
    default: {
      const never: never = verdict;
      throw new Error(`unhandled isolation verdict ${JSON.stringify(never)}`);
    }
  }
}

/** The sandbox every backend's launches run in, masking the state dir. */
function bubblewrapFor(context: BackendContext): Sandbox {
  const bwrapPath = context.env[BWRAP_ENV];
  return createBubblewrapSandbox({
    ...(bwrapPath !== undefined && bwrapPath !== "" ? { bwrapPath } : {}),
    log: context.log,
    // The state dir holds every workload's files, the signing key and the admin token.
    maskedRoots: [context.layout.root],
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

/** How long a node verdict is reused before a new probe allocation is submitted. */
const CLUSTER_ISOLATION_TTL_MS = 10 * 60 * 1000;
/**
 * How long an Unverified verdict stands before a session request probes again. Most
 * Unverified verdicts at start are an outage (controller down, slurm.conf mid-edit), not a
 * node without bwrap: kept for the daemon's lifetime, they switched sessions off until
 * someone restarted it.
 */
export const CLUSTER_ISOLATION_RETRY_MS = 60 * 1000;

/**
 * A cluster backend with sessions: the same policy as the local one, except that the sandbox
 * is verified ON THE NODES, by a probe allocation submitted through the backend itself (a
 * check on the daemon's host says nothing about a node without bwrap), and it is put on the
 * launch line by wrapping the backend (isolation/through-backend.ts), steps included. The
 * state dir must be on a file system the nodes share (it already must: workers read their
 * credentials and workspaces there); the probe lays its two sibling allocations out in it.
 * Verified at start (a few seconds: one short job); re-verified on demand every 10 minutes.
 */
async function withClusterSessionIsolation(
  context: BackendContext,
  backend: AllocationBackend,
): Promise<AllocationBackend> {
  if (workerGatewayListenFromEnv(context.env).kind !== "Enabled") {
    return withoutSessionIsolation(
      backend,
      `sessions are not enabled on this daemon: the worker gateway is off (set ${WORKER_LISTEN_ENV}=HOST:PORT)`,
    );
  }
  const profile = backend.profiles().find((p) => p.kinds.includes("SESSION"));
  if (profile === undefined) {
    return withoutSessionIsolation(backend, "no profile of this cluster offers SESSION");
  }
  const sandbox = bubblewrapFor(context);
  const probe = () =>
    verifyThroughBackend({
      backend,
      sandbox,
      probeRoot: join(context.layout.backendDir(backend.name), "isolation-probe"),
      profile: profile.name,
      clock: context.clock,
      log: context.log,
    });
  const first = await probe();
  // Launch lines are wrapped in the sandbox only once it has been seen working on the nodes:
  // wrapping BATCH jobs in a bwrap the nodes may not have would fail every one of them.
  let sandboxing = first.kind === "Verified";
  if (first.kind === "Verified") {
    context.log.info("session isolation verified on the nodes", { mechanism: first.mechanism });
  } else {
    context.log.warn("session isolation unavailable on the nodes; probed again on demand", {
      message: first.message,
    });
  }
  // A shorter memory for an Unverified verdict: most are an outage, not a node without bwrap.
  const cachedProbe = cachedVerdict(probe, {
    clock: context.clock,
    seed: first,
    ttlMs: (verdict) =>
      verdict.kind === "Verified" ? CLUSTER_ISOLATION_TTL_MS : CLUSTER_ISOLATION_RETRY_MS,
  });
  const verify = async (): Promise<IsolationVerdict> => {
    const verdict = await cachedProbe();
    if (verdict.kind === "Unverified") {
      return {
        kind: "Unverified",
        message: `sessions need a verified per-allocation sandbox on the nodes: ${verdict.message}`,
      };
    }
    if (!sandboxing) {
      context.log.info("session isolation verified on the nodes", {
        mechanism: verdict.mechanism,
      });
      sandboxing = true;
    }
    return verdict;
  };
  const sandboxed = sandboxedBackend(backend, {
    sandbox,
    verify,
    locate: locateInStateDir(context.layout.root),
  });
  const current = (): AllocationBackend => (sandboxing ? sandboxed : backend);
  const switching: AllocationBackend & SessionIsolationProvider = {
    name: backend.name,
    profiles: () => backend.profiles(),
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
      return isTaskRunner(chosen)
        ? chosen.runTask(target, command, options)
        : backend.runTask(target, command, options);
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
