/**
 * What every part of the local backend shares, made once when the backend is created: its
 * options with their defaults filled in, the jobs directory (created here), this boot's id,
 * the call counters diagnostics report, and the supervisors this process started that have
 * not claimed their job yet.
 */
import { mkdirSync } from "node:fs";
import { availableParallelism, totalmem } from "node:os";
import { dirname, isAbsolute } from "node:path";
import type { ResourceProfile } from "../../core/models.ts";
import type { LaunchWrapper, Sandbox } from "../../core/sandbox.ts";
import type { Clock } from "../../lib/clock.ts";
import { type FaultPoints, noFaultPoints } from "../../lib/fault-point.ts";
import type { Log } from "../../lib/log.ts";
import { forbiddenRoots } from "../../lib/mount-sources.ts";
import { createProgramRunner, type ProgramRunner } from "../../lib/process-runner.ts";
import type { HostCapacity } from "./array-launch.ts";
import type { ElementsCache } from "./array-records.ts";
import {
  DEFAULT_KILL_GRACE_MS,
  DEFAULT_PATH,
  DEFAULT_TASK_OUTPUT_CAP_BYTES,
  defaultLocalProfiles,
  type LocalBackendOptions,
  utf8Lang,
} from "./backend-options.ts";
import { sweepJobCgroups } from "./cgroup-sweep.ts";
import type { JobSnapshot } from "./job-state.ts";
import { describeEnforcement, type LimitEnforcement } from "./limit-enforcement.ts";
import { readBootId } from "./proc.ts";
import { jobsRoot } from "./records.ts";

export interface LocalContext {
  readonly options: LocalBackendOptions;
  readonly backendDir: string;
  readonly clock: Clock;
  readonly log: Log;
  readonly sandbox: Sandbox | undefined;
  /** How every launch is wrapped: the sandbox, or the plain privilege drop without one. */
  readonly wrapper: LaunchWrapper;
  readonly faults: FaultPoints;
  readonly killGraceMs: number;
  /** Where no declared mount's source may resolve (the daemon's trees and the host's). */
  readonly mountForbidden: readonly string[];
  readonly taskOutputCapBytes: number;
  readonly programs: ProgramRunner;
  readonly profileList: readonly ResourceProfile[];
  readonly limits: LimitEnforcement;
  readonly selfCommand: readonly string[];
  /** The directory of job records. */
  readonly jobs: string;
  readonly bootId: string;
  /** PATH and LANG for jobs and supervisors (HOME is the job's workspace). */
  readonly baseEnv: Readonly<Record<string, string>>;
  /** Bound back read-only in every sandbox: the program's own directories. */
  readonly sandboxReadOnly: readonly string[];
  readonly calls: Record<string, number>;
  count(name: string): void;
  /**
   * Supervisors this process started that had not claimed their job when last looked at.
   * In memory only: after a restart the first look starts another one, which is harmless
   * (the claim is exclusive) and is exactly how a record orphaned by a crash gets run.
   */
  readonly launching: Map<string, Bun.Subprocess>;
  /** This machine's CPUs and memory: how many array elements fit at once by default. */
  readonly host: HostCapacity;
  /** What observations already read of each job array's elements (array-records.ts). */
  readonly elementsCache: ElementsCache;
  /** Stale cgroups of this daemon go at start, and again whenever a job is forgotten. */
  sweepCgroups(): void;
}

/** One read of one record: absent, or what it says. */
export type Looked =
  | { readonly kind: "Absent" }
  | { readonly kind: "Present"; readonly snapshot: Exclude<JobSnapshot, { kind: "Absent" }> };

export function createLocalContext(
  options: LocalBackendOptions,
  wrapper: LaunchWrapper,
): LocalContext {
  const { backendDir, log } = options;
  const limits: LimitEnforcement = options.limits ?? { kind: "None", why: "none configured" };
  const selfCommand = [...options.selfCommand];
  if (selfCommand.length === 0) throw new Error("selfCommand must not be empty");
  const jobs = jobsRoot(backendDir);
  mkdirSync(jobs, { recursive: true, mode: 0o700 });
  const bootId = readBootId();
  const calls: Record<string, number> = {};
  const cgroups = limits.kind === "Cgroup" ? limits.driver : null;
  const context: LocalContext = {
    options,
    backendDir,
    clock: options.clock,
    log,
    sandbox: options.sandbox,
    wrapper,
    faults: options.faults ?? noFaultPoints,
    killGraceMs: options.killGraceMs ?? DEFAULT_KILL_GRACE_MS,
    mountForbidden: forbiddenRoots(
      options.mountForbidden ?? [options.spoolDir, options.backendDir],
    ),
    taskOutputCapBytes: options.taskOutputCapBytes ?? DEFAULT_TASK_OUTPUT_CAP_BYTES,
    programs: createProgramRunner(),
    profileList: options.profiles ?? defaultLocalProfiles(),
    limits,
    selfCommand,
    jobs,
    bootId,
    baseEnv: {
      PATH: options.hostEnv["PATH"] ?? DEFAULT_PATH,
      LANG: utf8Lang(options.hostEnv["LANG"]),
    },
    sandboxReadOnly: unique([
      ...selfCommand.filter((p) => isAbsolute(p)).map((p) => dirname(p)),
      ...(options.sandboxReadOnly ?? []),
    ]),
    calls,
    count(name) {
      calls[name] = (calls[name] ?? 0) + 1;
    },
    launching: new Map(),
    host: { cpus: availableParallelism(), memoryMb: Math.floor(totalmem() / 1024 ** 2) },
    elementsCache: new Map(),
    sweepCgroups() {
      if (cgroups === null) return;
      sweepJobCgroups(cgroups, backendDir, bootId, log).catch((error) =>
        log.warn("cannot sweep job cgroups", { error: String(error) }),
      );
    },
  };
  log.info("local job limits", { enforcement: describeEnforcement(limits) });
  context.sweepCgroups();
  return context;
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}
