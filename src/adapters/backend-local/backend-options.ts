/**
 * What the local backend is built from and offers: its options, its port's type, the
 * defaults it falls back to (kill grace, output cap, PATH and LANG for jobs) and the one
 * built-in profile. The backend itself is backend.ts.
 */
import { availableParallelism, totalmem } from "node:os";
import { DEFAULT_PIDS_MAX, type ResourceProfile } from "../../core/models.ts";
import type { BackendWith } from "../../core/ports/allocation-backend.ts";
import type { LaunchWrapper, Sandbox } from "../../core/sandbox.ts";
import type { Clock } from "../../lib/clock.ts";
import type { FaultPoints } from "../../lib/fault-point.ts";
import type { Log } from "../../lib/log.ts";
import type { LimitEnforcement } from "./limit-enforcement.ts";

export const LOCAL_BACKEND_NAME = "local";

/** Fault points a crash test can enable (see src/lib/fault-point.ts). */
export const LOCAL_FAULT_POINTS = {
  /** The record is durable; no supervisor was started. */
  afterRecordBeforeSpawn: "local.after-record-before-spawn",
  /** The supervisor was started; the caller has not been told (no handle recorded). */
  afterSpawn: "local.after-spawn",
} as const;

export const DEFAULT_KILL_GRACE_MS = 5_000;
export const DEFAULT_TASK_OUTPUT_CAP_BYTES = 1024 * 1024;
export const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";
const DEFAULT_LANG = "C.UTF-8";

/**
 * The daemon's LANG when it names a UTF-8 locale, else C.UTF-8 (in every glibc): a service
 * started with LANG unset or POSIX gave jobs ASCII as Python's preferred encoding, and
 * science code reading UTF-8 data failed with UnicodeDecodeError.
 */
export function utf8Lang(hostLang: string | undefined): string {
  return hostLang !== undefined && /\.utf-?8(@|$)/i.test(hostLang) ? hostLang : DEFAULT_LANG;
}

export interface LocalBackendOptions {
  /** The backend's private area: `StateLayout.backendDir("local")`. */
  readonly backendDir: string;
  /** The spool every request's directories lie below (reached with no link followed). */
  readonly spoolDir: string;
  /** How to re-invoke this binary (see src/lib/self-command.ts); `__supervise` is appended. */
  readonly selfCommand: readonly string[];
  readonly clock: Clock;
  readonly log: Log;
  /**
   * Where PATH and LANG for jobs come from (HOME is the job's workspace). Nothing else of it reaches a job or a
   * supervisor: the daemon's environment may hold secrets a job has no business reading.
   */
  readonly hostEnv: Readonly<Record<string, string | undefined>>;
  /** Replaces the default single profile. */
  readonly profiles?: readonly ResourceProfile[];
  /** When given, every launch runs inside it and the backend declares session isolation. */
  readonly sandbox?: Sandbox;
  /**
   * Without a sandbox: the wrapper every launch goes through (who it runs as, a clean
   * environment), handed in by whoever builds the backend (the daemon's composition,
   * `openai4s restore`, tests), so this adapter builds no other adapter's wrapper. One of
   * `sandbox` and `plainLaunch` is required.
   */
  readonly plainLaunch?: LaunchWrapper;
  /**
   * The daemon's own trees (its state dir and spool), which no mount's source may resolve
   * into; the host's /proc, /sys, /dev and /etc are added. Default: the spool and backendDir.
   */
  readonly mountForbidden?: readonly string[];
  /** Extra directories a sandboxed launch may read (e.g. the project root when from source). */
  readonly sandboxReadOnly?: readonly string[];
  readonly faults?: FaultPoints;
  /** Between SIGTERM and SIGKILL of a job's group on cancel or time limit. */
  readonly killGraceMs?: number;
  /** Per stream, for `runTask`. */
  readonly taskOutputCapBytes?: number;
  /** The worker gateway's unix socket: how workers of a profile without network dial it. */
  readonly workerSocket?: string;
  /**
   * How jobs are held to their profile's memory, processes and CPUs (detected by
   * `detectLimitEnforcement`). Default: none, said in diagnostics.
   */
  readonly limits?: LimitEnforcement;
}

export type LocalBackend = BackendWith<"tasks" | "changes" | "terminalFacts" | "launchSandbox">;
export type IsolatingLocalBackend = BackendWith<
  "tasks" | "changes" | "terminalFacts" | "launchSandbox" | "sessionIsolation"
>;

/**
 * One node, every CPU, no GPU, no time limit, three quarters of the memory: the rest is the
 * daemon's, the page cache's and whoever else uses this machine (a job past it ends
 * OUT_OF_MEMORY where cgroups are in force, instead of the host's OOM killer picking).
 */
/**
 * The most elements one job array may have on a local profile that does not say
 * (`max_array_size` in a profiles file; 0 there: no arrays). Every element has a line pair in
 * its array's record, read on each observation: ten thousand is the file's ceiling.
 */
export const DEFAULT_LOCAL_MAX_ARRAY_SIZE = 1_000;
export const LOCAL_MAX_ARRAY_SIZE_CEILING = 10_000;

export function defaultLocalProfiles(): readonly ResourceProfile[] {
  return [
    {
      name: "default",
      description: "This machine: one node, all of its CPUs",
      kinds: ["BATCH", "SESSION"],
      resources: {
        nodes: 1,
        cpus: availableParallelism(),
        gpus: 0,
        memoryMb: Math.floor((totalmem() * 3) / 4 / 1024 ** 2),
        timeLimitSeconds: null,
      },
      pidsMax: DEFAULT_PIDS_MAX,
      network: "host",
      maxArraySize: DEFAULT_LOCAL_MAX_ARRAY_SIZE,
    },
  ];
}
