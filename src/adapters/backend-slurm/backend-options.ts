/**
 * What the Slurm backend is given: the administrator's placements behind each profile
 * (cluster.toml, adapted by the profile loader), the broker, and the options with their
 * defaults.
 */
import type { ResourceMaxima, ResourceProfile } from "../../core/models.ts";
import type { BackendWith, ProfileCheck } from "../../core/ports/allocation-backend.ts";
import type { Clock } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import type { SlurmBroker } from "./broker.ts";
import type { OrphanReport } from "./orphan-sweeper.ts";

/**
 * What a profile maps to on the cluster (D5: the administrator's side of cluster.toml). The
 * profile loader adapts its own type to this.
 */
export interface SlurmPlacement {
  readonly partition: string | null;
  readonly qos: string | null;
  readonly account: string | null;
  readonly nodes: number;
  /** Per node (per task: one task per node). */
  readonly cpus: number;
  /** Per node. */
  readonly gpus: number;
  readonly memoryMb: number | null;
  readonly timeLimitSeconds: number | null;
  /**
   * How far a submission may raise the four above (`max_cpus`, ...); absent, or a field left
   * out: the default is the maximum.
   */
  readonly maxima?: ResourceMaxima;
  /** Seconds before the limit the job is warned (SIGURG); 0 turns it off; default 300. */
  readonly warnBeforeLimitSeconds?: number | null;
  /** The most tasks one BATCH may ask for (admission checks); absent: 1. */
  readonly maxTasks?: number;
  /** srun's `--mpi` for a multi-task BATCH; null or absent: the cluster's MpiDefault. */
  readonly mpi?: string | null;
}

export interface PlacementCatalog {
  /** The public view: what scientists see. No partition, no QoS. */
  profiles(): readonly ResourceProfile[];
  /** The administrator's mapping for a profile name, or null when there is no such profile. */
  placement(profile: string): SlurmPlacement | null;
}

export interface SlurmBackendOptions {
  readonly broker: SlurmBroker;
  readonly placements: PlacementCatalog;
  readonly clock: Clock;
  readonly log: Log;
  /** PATH inside jobs and steps (the daemon's own PATH never reaches a job). */
  readonly jobPath?: string;
  /**
   * HOME inside jobs: the service account's home from the password database, not the
   * daemon's $HOME. Only the variable: the account's dotfiles are never run (see broker.ts).
   */
  readonly jobHome?: string;
  /** The in-allocation launcher a WORKER batch script calls. */
  readonly launcher?: string;
  /** How far back the token lookup searches accounting. */
  readonly accountingLookbackSeconds?: number;
  /** LOST needs absence from queue and accounting for at least this long... */
  readonly lostGraceMs?: number;
  /** ...and over at least this many consecutive successful observations. */
  readonly lostMinObservations?: number;
  /** sbatch calls in flight at once during one submit(). */
  readonly submitConcurrency?: number;
  /** Per stream, for runTask's output. */
  readonly taskMaxOutputBytes?: number;
  /** How long a SIGKILLed job's ending waits for accounting's memory figures (end-hints.ts). */
  readonly usageGraceMs?: number;
  /**
   * This daemon's identity (one per state dir, orphan-sweeper.ts), carried in every job's
   * comment as `TOKEN.OWNER`, so two daemons on one cluster never take each other's jobs
   * for orphans.
   */
  readonly ownerId?: string;
  /** What the orphan sweep last found, shown in diagnostics. */
  readonly orphanReport?: () => OrphanReport | null;
  /** The scheduler's last dry run of each profile (profile-checks.ts), shown in diagnostics. */
  readonly profileChecks?: () => readonly ProfileCheck[];
  /** Names this process's change feed (tests); by default random, so a restart expires cursors. */
  readonly feedInstance?: string;
}

export const DEFAULT_JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
export const DEFAULT_JOB_LANG = "C.UTF-8";
export const DEFAULT_ACCOUNTING_LOOKBACK_SECONDS = 7 * 86_400;
export const DEFAULT_LOST_GRACE_MS = 60_000;
export const DEFAULT_LOST_MIN_OBSERVATIONS = 3;
export const DEFAULT_USAGE_GRACE_MS = 30_000;
/** How long before its limit a job is warned (SIGURG) unless its profile says otherwise. */
export const DEFAULT_WARN_BEFORE_LIMIT_SECONDS = 300;

export type SlurmBackend = BackendWith<"tasks" | "changes" | "jobEnv">;
