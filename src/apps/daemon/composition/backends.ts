/**
 * The backend registry (`openai4s serve --backend NAME`). Adding a backend is adding one
 * entry: `serve --help`, the validation of --backend and the daemon all read this table.
 * The one file outside src/adapters/backend-slurm/ that may name the scheduler, because it is
 * where backends are chosen and wired (INV-2: the leak guard exempts this file and that
 * folder by path, nothing else of the composition root): the rest of the composition gets
 * what it needs from a cluster backend as parameters.
 */

import { readFileSync } from "node:fs";
import { isAbsolute } from "node:path";
import { createLocalBackend } from "../../../adapters/backend-local/backend.ts";
import { LOCAL_BACKEND_NAME } from "../../../adapters/backend-local/backend-options.ts";
import { detectLimitEnforcement } from "../../../adapters/backend-local/limit-enforcement.ts";
import { localProfiles } from "../../../adapters/backend-local/profiles.ts";
import { rewriteRecordPaths } from "../../../adapters/backend-local/records.ts";
import {
  createSlurmBackend,
  DEFAULT_JOB_PATH,
  type PlacementCatalog,
  JOB_ENV as SLURM_JOB_ENV,
  RANK_ENV as SLURM_RANK_ENV,
  TASK_ENV as SLURM_TASK_ENV,
} from "../../../adapters/backend-slurm/backend.ts";
import { ARRAY_INDEX_ENV, DEADLINE_ENV } from "../../../adapters/backend-slurm/batch-script.ts";
import { createSlurmBroker } from "../../../adapters/backend-slurm/broker.ts";
import { loadClusterPlacements } from "../../../adapters/backend-slurm/cluster-config.ts";
import {
  createOrphanSweeper,
  loadOwnerId,
} from "../../../adapters/backend-slurm/orphan-sweeper.ts";
import { createProfileChecks } from "../../../adapters/backend-slurm/profile-checks.ts";
import { createSbatchTestRun } from "../../../adapters/backend-slurm/profiles-preflight.ts";
import {
  hiddenNamesOf,
  publicMessageRewriter,
  withPublicMessages,
} from "../../../adapters/backend-slurm/public-messages.ts";
import { createSiteArrayLimit } from "../../../adapters/backend-slurm/site-array-limit.ts";
import {
  verifiedInBackground,
  withoutSessionIsolation,
} from "../../../core/isolation/decorators.ts";
import type { StateLayout } from "../../../core/layout.ts";
import type { AllocationBackend } from "../../../core/ports.ts";
import { withSpoolFullEndings } from "../../../core/spool-full-endings.ts";
import { backgroundTimers } from "../../../lib/clock.ts";
import { errorCode } from "../../../lib/durable-fs.ts";
import { spoolFullness } from "../../../lib/spool-space.ts";
import { readTomlSubset } from "../../../lib/toml/cross-check.ts";
import {
  type BackendContext,
  type BackendCreation,
  type BackendEntry,
  type BackgroundService,
  verifierService,
} from "./context.ts";
import { LOCAL_PROFILES_ENV, type LocalSettings } from "./local-settings.ts";
import { type SandboxReadOnly, sandboxReadOnlyDirs } from "./sandbox-read-only.ts";
import {
  LOCAL_ISOLATION_INTERVAL_MS,
  localSessionIsolation,
  PROBE_JOB_TIME_LIMIT_SECONDS,
  PROBE_PROFILE,
  withClusterSessionIsolation,
} from "./session-isolation.ts";
import { workerSocketPath } from "./worker-socket.ts";

export {
  type CheckedProfile,
  type ConfigPreflight,
  checkClusterConfig,
  preflightClusterConfig,
} from "../../../adapters/backend-slurm/cluster-config.ts";

export const DEFAULT_BACKEND = LOCAL_BACKEND_NAME;

/** How often the daemon asks the scheduler again whether each profile can run. */
const PROFILE_CHECK_INTERVAL_MS = 10 * 60_000;

/** Far more than any profiles file; a bigger one is a mistake (a log, a binary). */
const MAX_LOCAL_PROFILES_BYTES = 1024 * 1024;

/**
 * The local profiles: OPENAI4S_LOCAL_PROFILES names a file read here, in the strict TOML
 * subset (and through the same cross-checked reader) the cluster config uses, so a file
 * that two TOML readers would read differently is refused rather than guessed at.
 */
function configuredLocalProfiles(local: LocalSettings): ReturnType<typeof localProfiles> {
  const path = local.profilesFile;
  if (path === null) return localProfiles(local.knobs);
  const named = `${LOCAL_PROFILES_ENV}=${JSON.stringify(path)}`;
  if (!isAbsolute(path)) return { kind: "ConfigError", message: `${named}: not an absolute path` };
  let text: string;
  try {
    const bytes = readFileSync(path);
    if (bytes.length > MAX_LOCAL_PROFILES_BYTES) {
      return {
        kind: "ConfigError",
        message: `${named}: larger than ${MAX_LOCAL_PROFILES_BYTES} bytes`,
      };
    }
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (error) {
    const code = errorCode(error);
    const why = typeof code === "string" ? code : "not UTF-8 text";
    return { kind: "ConfigError", message: `${named}: cannot read it (${why})` };
  }
  return localProfiles(local.knobs, { name: path, read: readTomlSubset(text) });
}

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
      const configured = configuredLocalProfiles(context.settings.local);
      if (configured.kind === "ConfigError") return configured;
      const backendDir = context.layout.backendDir(LOCAL_BACKEND_NAME);
      const limits = detectLimitEnforcement({
        cgroupRoot: context.settings.local.cgroupRoot,
        backendDir,
      });
      const options = {
        profiles: configured.profiles,
        backendDir,
        spoolDir: context.layout.spool,
        limits,
        // Only with the gateway on: a profile without network then refuses sessions, named.
        ...(context.settings.workerListen !== null
          ? { workerSocket: workerSocketPath(context.layout) }
          : {}),
        selfCommand: context.selfCommand,
        clock: context.clock,
        log: context.log,
        hostEnv: context.env,
        faults: context.faults,
        identities: context.identities,
        mountForbidden: [context.layout.root, context.layout.spool],
      };
      const extra = sandboxReadOnly(context);
      if (extra.kind === "ConfigError") return extra;
      const isolation = await localSessionIsolation(context, extra.dirs);
      let backend: AllocationBackend;
      const services: BackgroundService[] = [];
      switch (isolation.kind) {
        case "Sessions": {
          const verified = verifiedInBackground({
            backend: createLocalBackend({ ...options, sandbox: isolation.sandbox }),
            sandbox: isolation.sandbox,
            log: context.log,
            intervalMs: LOCAL_ISOLATION_INTERVAL_MS,
          });
          backend = verified.backend;
          services.push(verifierService(verified.verifier));
          break;
        }
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
      return { kind: "Created", backend, services };
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
      const extra = sandboxReadOnly(context);
      if (extra.kind === "ConfigError") return extra;
      const slurmConf = context.env["SLURM_CONF"];
      const uid = process.getuid?.() ?? 0;
      const broker = createSlurmBroker({
        path: context.env["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
        ...(slurmConf === undefined || slurmConf === "" ? {} : { slurmConf }),
        // The account that submits every job: squeue lists its jobs and keeps ours. Jobs
        // submitted as their owners (or, by a root daemon, as their leased uids) belong to
        // those accounts, so then every account's.
        listUid:
          uid === 0 || placements.catalog.profiles().some((p) => p.runAs === "owner") ? null : uid,
      });
      const sweep = context.settings.orphanSweep;
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
              policy: sweep.policy,
              intervalMs: sweep.intervalSeconds * 1000,
              knownTokens,
              clock: context.clock,
              log: context.log,
            });
      const profileChecks = slurmProfileChecks(context, placements.catalog, slurmConf);
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
      const slurmBackend = build(arrayLimit.catalog(placements.catalog), true);
      // Sessions engine's wiring: the sandbox on the launch line, verified on the nodes by a
      // probe on its own smallest placement (a backend over a one-entry catalog).
      const probeBackend = (sessionProfile: string) =>
        build(probePlacements(placements.catalog, sessionProfile), false);
      const isolated = await withClusterSessionIsolation(
        context,
        slurmBackend,
        probeBackend,
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
        extra.dirs,
      );
      return {
        kind: "Created",
        backend: isolated.backend,
        services: [
          ...isolated.services,
          arrayLimit,
          profileChecks,
          ...(sweeper === null ? [] : [sweeper]),
        ],
      };
    },
  },
};

/**
 * Each profile asked of the scheduler at start and every few minutes: a profile it refuses
 * (a partition that does not exist) is logged in its words and shown in diagnostics,
 * instead of failing every submission without a clue.
 */
function slurmProfileChecks(
  context: BackendContext,
  catalog: PlacementCatalog,
  slurmConf: string | undefined,
) {
  return createProfileChecks({
    catalog,
    run: createSbatchTestRun({
      path: context.env["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
      ...(slurmConf === undefined || slurmConf === "" ? {} : { slurmConf }),
    }),
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

/** The admin's extra read-only sandbox directories; the state dir and spool are masked. */
function sandboxReadOnly(context: BackendContext): SandboxReadOnly {
  return sandboxReadOnlyDirs(context.settings.sandboxReadOnly, [
    context.layout.root,
    context.layout.spool,
  ]);
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

function backendNames(): readonly string[] {
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
