/**
 * What every part of the Slurm backend shares, made once when the backend is created: the
 * broker and the placements, the options with their defaults filled in, the absences that
 * LOST is decided on, and the scheduler's health as diagnostics report it.
 */
import { userInfo } from "node:os";
import type { Clock } from "../../lib/clock.ts";
import type { Log } from "../../lib/log.ts";
import {
  DEFAULT_ACCOUNTING_LOOKBACK_SECONDS,
  DEFAULT_JOB_LANG,
  DEFAULT_JOB_PATH,
  DEFAULT_LOST_GRACE_MS,
  DEFAULT_LOST_MIN_OBSERVATIONS,
  DEFAULT_USAGE_GRACE_MS,
  type PlacementCatalog,
  type SlurmBackendOptions,
} from "./backend-options.ts";
import type { SlurmBroker } from "./broker.ts";
import type { SlurmCommandError } from "./broker-outcomes.ts";

export interface Absence {
  readonly handle: string;
  readonly since: number;
  readonly count: number;
}

export interface SlurmContext {
  readonly options: SlurmBackendOptions;
  readonly broker: SlurmBroker;
  readonly placements: PlacementCatalog;
  readonly clock: Clock;
  readonly log: Log;
  /** The documented base of every job's environment (README: "Jobs get a minimal environment"). */
  readonly baseJobEnv: Readonly<Record<string, string>>;
  readonly launcher: string;
  readonly lookbackSeconds: number;
  readonly lostGraceMs: number;
  readonly lostMinObservations: number;
  readonly submitConcurrency: number;
  readonly taskMaxOutputBytes: number;
  readonly usageGraceMs: number;
  /** Per allocation: since when, and for how many observations, it was seen nowhere. */
  readonly absences: Map<string, Absence>;
  /** What diagnostics say of the scheduler: the last call's outcome. */
  health: { healthy: boolean; message: string };
  noteFailure(error: SlurmCommandError): void;
  noteSuccess(command: string): void;
}

export function createSlurmContext(options: SlurmBackendOptions): SlurmContext {
  const { broker, placements, clock, log } = options;
  const jobPath = options.jobPath ?? DEFAULT_JOB_PATH;
  const jobHome = options.jobHome ?? userInfo().homedir;
  const ctx: SlurmContext = {
    options,
    broker,
    placements,
    clock,
    log,
    baseJobEnv: { PATH: jobPath, HOME: jobHome, LANG: DEFAULT_JOB_LANG },
    launcher: options.launcher ?? "srun",
    lookbackSeconds: options.accountingLookbackSeconds ?? DEFAULT_ACCOUNTING_LOOKBACK_SECONDS,
    lostGraceMs: options.lostGraceMs ?? DEFAULT_LOST_GRACE_MS,
    lostMinObservations: options.lostMinObservations ?? DEFAULT_LOST_MIN_OBSERVATIONS,
    submitConcurrency: Math.max(1, options.submitConcurrency ?? 8),
    taskMaxOutputBytes: options.taskMaxOutputBytes ?? 1024 * 1024,
    usageGraceMs: options.usageGraceMs ?? DEFAULT_USAGE_GRACE_MS,
    absences: new Map<string, Absence>(),
    health: { healthy: true, message: "no calls yet" },
    noteFailure(error) {
      // A refused sbatch/scancel/srun is an answer about one job. A refused listing is not: a
      // squeue or sacct that exits nonzero (unparsable slurm.conf, no such user) leaves every
      // phase unread, and diagnostics saying "healthy" then hide why nothing moves.
      if (error.kind === "refused" && error.command !== "squeue" && error.command !== "sacct") {
        return;
      }
      ctx.health = { healthy: false, message: error.message };
      log.warn("scheduler call failed", {
        command: error.command,
        kind: error.kind,
        error: error.message,
      });
    },
    noteSuccess(command) {
      if (!ctx.health.healthy) log.info("scheduler answers again", { command });
      ctx.health = { healthy: true, message: `last ${command} answered` };
    },
  };
  return ctx;
}
