/**
 * The Slurm backend as a plugin (core/ports/backend-plugin.ts). Jobs go through sbatch/
 * squeue/sacct/scancel/srun found on the daemon's PATH, with SLURM_CONF passed through when
 * set; nothing else of the daemon's environment reaches them or the jobs. Composed here from
 * the cluster config: the broker, the orphan sweep, the profile checks, the site's array
 * limit, scheduler text rewritten for the public, and the daemon's isolation policy applied
 * on the nodes through a probe on each session profile's smallest placement.
 */
import {
  type BackendPlugin,
  type BackendPluginContext,
  PROBE_JOB_TIME_LIMIT_SECONDS,
  PROBE_PROFILE,
} from "../../core/ports/backend-plugin.ts";
import { withSpoolFullEndings } from "../../core/spool-full-endings.ts";
import { backgroundTimers } from "../../lib/clock.ts";
import { spoolFullness } from "../../lib/spool-space.ts";
import {
  createSlurmBackend,
  DEFAULT_JOB_PATH,
  type PlacementCatalog,
  JOB_ENV as SLURM_JOB_ENV,
  RANK_ENV as SLURM_RANK_ENV,
  TASK_ENV as SLURM_TASK_ENV,
} from "./backend.ts";
import { ARRAY_INDEX_ENV, DEADLINE_ENV } from "./batch-script.ts";
import { createSlurmBroker } from "./broker.ts";
import {
  checkClusterConfig,
  loadClusterPlacements,
  preflightClusterConfig,
} from "./cluster-config.ts";
import { createOrphanSweeper, loadOwnerId } from "./orphan-sweeper.ts";
import { createProfileChecks, withAcceptedSubmissions } from "./profile-checks.ts";
import { createSbatchTestRun } from "./profiles-preflight.ts";
import { hiddenNamesOf, publicMessageRewriter, withPublicMessages } from "./public-messages.ts";
import { createSiteArrayLimit } from "./site-array-limit.ts";

export const SLURM_BACKEND_NAME = "slurm";

/** How often the daemon asks the scheduler again whether each profile can run. */
const PROFILE_CHECK_INTERVAL_MS = 10 * 60_000;

/** The scheduler's clients: the daemon's PATH, and SLURM_CONF when the admin set one. */
function clientEnv(env: Readonly<Record<string, string | undefined>>) {
  const slurmConf = env["SLURM_CONF"];
  return {
    path: env["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
    ...(slurmConf === undefined || slurmConf === "" ? {} : { slurmConf }),
  };
}

/**
 * Each profile asked of the scheduler at start and every few minutes: a profile it refuses
 * (a partition that does not exist) is logged in its words and shown in diagnostics,
 * instead of failing every submission without a clue.
 */
function slurmProfileChecks(context: BackendPluginContext<unknown>, catalog: PlacementCatalog) {
  return createProfileChecks({
    catalog,
    run: createSbatchTestRun(clientEnv(context.env)),
    clock: context.clock,
    timers: backgroundTimers,
    log: context.log,
    intervalMs: PROFILE_CHECK_INTERVAL_MS,
    // What a principal reads of a refusal: the rewrite workload messages get.
    publicForm: publicMessageRewriter(hiddenNamesOf(catalog)),
  });
}

/**
 * The smallest placement the session profile's partition accepts, for the isolation probe:
 * the same partition, QoS and account (the probe must land where sessions land), one node,
 * one CPU, no GPUs, the cluster's default memory and the probe's short limit. A probe with
 * the session profile's full placement took GPUs every 10 minutes (issue 8).
 */
export function probePlacements(
  catalog: PlacementCatalog,
  sessionProfile: string,
): PlacementCatalog {
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

async function create(context: BackendPluginContext<Record<string, never>>) {
  if (context.clusterConfigPath === null) {
    return {
      kind: "ConfigError" as const,
      message: "the slurm backend needs --cluster-config FILE (see cluster.toml.example)",
    };
  }
  const placements = loadClusterPlacements(context.clusterConfigPath);
  if (placements.kind === "ConfigError") return placements;
  const uid = process.getuid?.() ?? 0;
  const broker = createSlurmBroker({
    ...clientEnv(context.env),
    // The account that submits every job: squeue lists its jobs and keeps ours. Jobs
    // submitted as their owners (or, by a root daemon, as their leased uids) belong to
    // those accounts, so then every account's.
    listUid:
      uid === 0 || placements.catalog.profiles().some((p) => p.runAs === "owner") ? null : uid,
  });
  const sweep = context.orphanSweep;
  let ownerId: string;
  try {
    ownerId = loadOwnerId(context.layout.backendDir(SLURM_BACKEND_NAME));
  } catch (error) {
    return { kind: "ConfigError" as const, message: `the daemon's owner id: ${String(error)}` };
  }
  const knownTokens = context.knownTokens;
  const sweeper =
    knownTokens === undefined
      ? null
      : createOrphanSweeper({
          broker,
          ownerId,
          policy: sweep.policy,
          intervalMs: sweep.intervalSeconds * 1000,
          knownTokens,
          clock: context.clock,
          // A background loop: it does not keep the daemon alive by itself.
          timers: backgroundTimers,
          log: context.log,
        });
  const profileChecks = slurmProfileChecks(context, placements.catalog);
  // Scheduler text reaches workload messages and the API: rewritten so no partition,
  // QoS or account name leaves the daemon (the log keeps the original).
  // The isolation probe's backend carries no owner id: its jobs have no allocation row,
  // and the orphan sweep must never report or cancel a probe that is running.
  const build = (catalog: PlacementCatalog, owned: boolean) =>
    withPublicMessages(
      // A job that failed on a full spool is named SPOOL_FULL, as a local one is.
      withSpoolFullEndings(
        createSlurmBackend({
          broker,
          placements: catalog,
          clock: context.clock,
          log: context.log,
          ...(owned ? { ownerId } : {}),
          ...(owned && sweeper !== null ? { orphanReport: () => sweeper.report() } : {}),
          ...(owned ? { profileChecks: () => profileChecks.report() } : {}),
        }),
        spoolFullness(context.layout.spool),
      ),
      hiddenNamesOf(placements.catalog),
    );
  // The site's MaxArraySize, read from the controller in the background (a minute between
  // tries until it answers): profiles show Slurm's default until then.
  const arrayLimit = createSiteArrayLimit({ broker, log: context.log, retryMs: 60_000 });
  const slurmBackend = withAcceptedSubmissions(
    build(arrayLimit.catalog(placements.catalog), true),
    profileChecks,
  );
  // The sandbox on the launch line, verified on the nodes by a probe on its own smallest
  // placement (a backend over a one-entry catalog).
  const isolated = await context.isolation.onNodes(
    slurmBackend,
    (sessionProfile) => build(probePlacements(placements.catalog, sessionProfile), false),
    {
      rankEnv: SLURM_RANK_ENV,
      taskEnv: SLURM_TASK_ENV,
      // UTF-8 whatever the node's default: Python's preferred encoding follows LANG.
      baseEnv: { PATH: DEFAULT_JOB_PATH, LANG: "C.UTF-8" },
      // The batch script exports the job's deadline (runway) before the launch line.
      // An array element's index, set by the batch script and the scheduler: inherited
      // by name, so a single job (where neither is set) is given nothing new. And the
      // job's own identity and resources (SLURM_JOB_ID, its nodes, CPUs, GPUs).
      launchEnv: [DEADLINE_ENV, ARRAY_INDEX_ENV, "SLURM_ARRAY_TASK_ID", ...SLURM_JOB_ENV],
    },
  );
  return {
    kind: "Created" as const,
    backend: isolated.backend,
    services: [
      ...isolated.services,
      arrayLimit,
      profileChecks,
      ...(sweeper === null ? [] : [sweeper]),
    ],
  };
}

export const slurmBackendPlugin: BackendPlugin<Record<string, never>> = {
  name: SLURM_BACKEND_NAME,
  describe:
    "a Slurm cluster through sbatch/squeue/sacct on PATH (SLURM_CONF honoured); needs --cluster-config FILE and --spool-dir DIR",
  requiresSpoolDir: true,
  // Its clients' own variables (PATH, SLURM_CONF) are passed on, not settings of the daemon.
  settings: { variables: [], read: () => ({ kind: "Parsed", settings: {} }) },
  configCheck: {
    check: (path) => checkClusterConfig(path),
    preflight: (path, env) => preflightClusterConfig(path, env),
  },
  capabilities: {
    tasks: true,
    changes: true,
    terminalFacts: false,
    sessionIsolation: false,
    launchSandbox: false,
    batchGate: false,
    jobEnv: true,
  },
  restore: null,
  schedulerBroker: "broker.ts",
  create,
};
