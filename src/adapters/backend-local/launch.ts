/**
 * From a submitted request to the job record the supervisor runs: the checks a request must
 * pass on this machine, the wrapped command line and its environment, and the paths the
 * sandbox exposes. Pure: the backend (backend.ts) writes the record and starts the supervisor.
 */
import { existsSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { ARRAY_INDEX_ENV } from "../../core/array/array-env.ts";
import { DEADLINE_ENV } from "../../core/deadline-env.ts";
import { allocationLogPath } from "../../core/layout.ts";
import type { ResourceProfile } from "../../core/models.ts";
import type { SubmitRequest } from "../../core/ports/allocation-backend.ts";
import { DEFAULT_WARN_BEFORE_LIMIT_SECONDS } from "../../core/reconciler/runway.ts";
import { checkResources, effectiveResources } from "../../core/resources.ts";
import type { LaunchWrapper, RunAs, SandboxMount, SandboxPaths } from "../../core/sandbox.ts";
import { HELPER_ENV } from "../../core/sandbox.ts";
import { arrayConcurrency, arrayProblem, type HostCapacity } from "./array-launch.ts";
import { jobLimitsFor, limitArgv } from "./job-limits.ts";
import type { LimitEnforcement } from "./limit-enforcement.ts";
import type { JobRecord } from "./records.ts";

export const RANK_ENV = "OPENAI4S_RANK";

/**
 * The allocation's own /tmp and /dev/shm (its `tmp/` and `shm/`), shared by the job and every
 * step run beside it, and by nobody else's launch. In the allocation directory: 0700 and the
 * daemon's on the host, never bound itself, so a job sees only the two directories as its
 * mount points and cannot swap either for a link; the supervisor empties it when the job ends.
 * The failure it guards: each step had a private tmpfs, so a file the job left in /tmp for
 * its steps (or a semaphore in /dev/shm) was not there.
 */
export function sharedTmpDir(allocationDir: string): string {
  return join(allocationDir, "node-tmp");
}

/** The two directories a sandbox binds as /tmp and /dev/shm (see bubblewrap.ts). */
export function sharedTmpSubdirs(dir: string): readonly string[] {
  return [join(dir, "tmp"), join(dir, "shm")];
}
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** A host with no room beside one element: one at a time. */
const ROOM_FOR_ONE: HostCapacity = { cpus: 0, memoryMb: 0 };

/** Why this request cannot run here, or null. */
export function validateLaunch(
  request: SubmitRequest,
  profiles: readonly ResourceProfile[],
  sandboxed: boolean,
  workerSocket: string | null = null,
): string | null {
  const profile = profiles.find((p) => p.name === request.profile);
  if (profile === undefined) return `unknown profile ${JSON.stringify(request.profile)}`;
  if (!profile.kinds.includes(request.workloadKind)) {
    return `profile ${profile.name} does not offer ${request.workloadKind}`;
  }
  // Fail closed: a job promised no network never runs with the host's.
  if (profile.network === "none" && !sandboxed) {
    return `profile ${profile.name} has network "none", and this machine's backend has no sandbox to give a job its own network`;
  }
  // Fail closed likewise: the admin's mounts exist only in the sandbox's mount namespace.
  if ((profile.mounts ?? []).length > 0 && !sandboxed) {
    return `profile ${profile.name} declares mounts, and this machine's backend has no sandbox to bind them in`;
  }
  // Admission refuses these first; one that got here anyway (a maximum lowered since the
  // workload was admitted) is refused, never run over the profile's bound.
  const bounds = checkResources(profile, request.resources, request.timeLimitSeconds ?? undefined);
  if (bounds.kind === "OverMaximum") {
    return bounds.fields.map((f) => `${f.path}: ${f.message}`).join("; ");
  }
  const array = arrayProblem(request, profile);
  if (array !== null) return array;
  if (profile.network === "none" && request.launch.kind === "WORKER" && workerSocket === null) {
    return `profile ${profile.name} has network "none", and the worker gateway has no unix socket for its workers`;
  }
  const launch = request.launch;
  switch (launch.kind) {
    case "COMMAND":
      if (launch.command.length === 0 || launch.command[0] === "") return "empty command";
      // Admission refuses this first (local profiles allow one task); a launch that got
      // here anyway would otherwise run once where the user asked for several ranks.
      if (launch.tasks !== undefined && launch.tasks.count > 1) {
        return `the local backend runs one task per workload; ${launch.tasks.count} requested`;
      }
      break;
    case "WORKER":
      if (!sandboxed) {
        return "this machine's backend has no per-allocation sandbox; it cannot place sessions";
      }
      if (launch.ranks !== 1) return `only one node here; ${launch.ranks} ranks requested`;
      if (launch.workerCommand.length === 0) return "empty worker command";
      if (launch.environment !== undefined) {
        const missing = missingEnvironment(launch.environment);
        if (missing !== null) return missing;
      }
      break;
    default: {
      const unreachable: never = launch;
      return `unknown launch ${JSON.stringify(unreachable)}`;
    }
  }
  for (const [name, value] of Object.entries(launch.env)) {
    if (!ENV_NAME.test(name)) return `invalid environment variable name ${JSON.stringify(name)}`;
    if (value.includes("\0")) return `environment variable ${name} contains a NUL byte`;
  }
  const limit = request.timeLimitSeconds;
  if (limit !== null && !(Number.isFinite(limit) && limit > 0)) {
    return `invalid time limit ${limit}`;
  }
  for (const p of [request.allocationDir, request.workspaceDir]) {
    if (!isAbsolute(p)) return `not an absolute path: ${p}`;
  }
  return null;
}

/**
 * This machine is the node: an environment whose interpreter (or prefix) is not here ends
 * the session at once with the path named, instead of a kernel that never starts.
 */
function missingEnvironment(environment: {
  readonly name: string;
  readonly python: string;
  readonly prefix: string | null;
}): string | null {
  for (const path of environment.prefix === null
    ? [environment.python]
    : [environment.prefix, environment.python]) {
    if (!existsSync(path)) {
      return `environment ${JSON.stringify(environment.name)}: ${path} does not exist on this machine`;
    }
  }
  return null;
}

/**
 * What a worker's sandbox binds read-only besides the daemon's own: the gateway's socket
 * (no network), and the environment's prefix (the kernel runs it, and cannot change it).
 */
function workerReadOnly(launch: SubmitRequest["launch"], socket: string | null): string[] {
  if (launch.kind !== "WORKER") return [];
  const prefix = launch.environment?.prefix ?? null;
  return [...(socket === null ? [] : [socket]), ...(prefix === null ? [] : [prefix])];
}

export interface RecordContext {
  readonly wrapper: LaunchWrapper;
  /** PATH and LANG from the daemon's environment (HOME is the workspace). */
  readonly baseEnv: Readonly<Record<string, string>>;
  readonly profiles: readonly ResourceProfile[];
  readonly killGraceMs: number;
  /** Bound back read-only inside the sandbox (the program's own directories). */
  readonly sandboxReadOnly: readonly string[];
  readonly now: number;
  /** How this machine holds jobs to their profile's memory, processes and CPUs. */
  readonly limits: LimitEnforcement;
  /** The worker gateway's unix socket, for workers of profiles without network. */
  readonly workerSocket?: string | null;
  /**
   * This machine's size, for how many elements of an array run at once without a
   * `maxConcurrent`. Absent: room for one (the backend always gives it).
   */
  readonly host?: HostCapacity;
}

/** The durable job record a supervisor runs: the wrapped argv, its environment, its paths. */
export function buildJobRecord(
  request: SubmitRequest,
  context: RecordContext,
  /** Who the job runs as (`wrapper.prepare`'s answer); null: the daemon's uid. */
  runAs: RunAs | null,
  /** The profile's mounts, resolved on the host for this job (see mount-sources.ts). */
  mounts: readonly SandboxMount[] = [],
): JobRecord {
  const { wrapper, killGraceMs } = context;
  const launch = request.launch;
  const own = context.profiles.find((p) => p.name === request.profile);
  // The job's cgroup and its array's share of the host count what it asked for.
  const profile = own === undefined ? undefined : sizedProfile(own, request.resources);
  const network = profile?.network ?? "host";
  // Without network the worker cannot dial TCP: it gets the gateway's unix socket, bound in.
  const socket = network === "none" ? (context.workerSocket ?? null) : null;
  const { argv, env, credentialDir } = launchOf(request, context.baseEnv, socket);
  // Only a sandbox binds it: without one the job uses the host's /tmp like any process.
  const sharedTmp = wrapper.sandboxed ? sharedTmpDir(request.allocationDir) : null;
  const paths = {
    ...sandboxPaths(
      request.workspaceDir,
      credentialDir,
      [...context.sandboxReadOnly, ...workerReadOnly(launch, socket)],
      sharedTmp,
    ),
    ...(mounts.length > 0 ? { mounts } : {}),
  };
  const timeLimitSeconds = request.timeLimitSeconds ?? profile?.resources.timeLimitSeconds ?? null;
  const limits =
    profile === undefined
      ? undefined
      : jobLimitsFor(request.token, profile, context.profiles, context.limits);
  const array =
    request.array === undefined || profile === undefined
      ? undefined
      : {
          size: request.array.size,
          maxConcurrent: arrayConcurrency(request.array, profile, context.host ?? ROOM_FOR_ONE),
        };
  // Copied in by name from the supervisor's launch of each run: the deadline is each run's
  // own, and an element's index is its own.
  const inherit = [
    ...(timeLimitSeconds === null ? [] : [DEADLINE_ENV]),
    ...(array === undefined ? [] : [ARRAY_INDEX_ENV]),
  ];
  const wrapped = wrapper.wrap(
    argv,
    paths,
    inherit.length === 0 ? { vars: env } : { vars: env, inherit },
    runAs,
    { network },
  );
  return {
    version: 1,
    token: request.token,
    allocationId: request.allocationId,
    workloadId: request.workloadId,
    epoch: request.epoch,
    // An array's elements each get their own cgroup: the supervisor puts each under it.
    argv: [...(array === undefined ? limitArgv(limits, wrapped) : wrapped)],
    env: { ...HELPER_ENV },
    jobEnv: env,
    cwd: request.workspaceDir,
    allocationDir: request.allocationDir,
    credentialDir,
    stdoutPath: allocationLogPath(request.allocationDir, "stdout"),
    stderrPath: allocationLogPath(request.allocationDir, "stderr"),
    timeLimitSeconds,
    // The profile's lead, or the same default the reconciler's TIME_LIMIT_NEAR uses.
    warnBeforeLimitSeconds: profile?.warnBeforeLimitSeconds ?? DEFAULT_WARN_BEFORE_LIMIT_SECONDS,
    killGraceMs,
    createdAt: context.now,
    ...(mounts.length > 0 ? { mounts: [...mounts] } : {}),
    ...(limits === undefined ? {} : { limits }),
    ...(array === undefined ? {} : { array }),
    network,
    ...(sharedTmp === null ? {} : { sharedTmpDir: sharedTmp }),
  };
}

/** The profile with the request's CPUs and memory in place of its defaults. */
function sizedProfile(
  profile: ResourceProfile,
  asked: SubmitRequest["resources"],
): ResourceProfile {
  if (asked === undefined) return profile;
  const { cpus, memoryMb, gpus } = effectiveResources(profile.resources, asked);
  return { ...profile, resources: { ...profile.resources, cpus, memoryMb, gpus } };
}

/** The job's own argv, its environment, and (a session's worker) its credential directory. */
function launchOf(
  request: SubmitRequest,
  baseEnv: Readonly<Record<string, string>>,
  /** The gateway's unix socket for a worker without network; null: it dials TCP. */
  socket: string | null,
): { argv: readonly string[]; env: Record<string, string>; credentialDir: string | null } {
  const launch = request.launch;
  const own = {
    OPENAI4S_WORKLOAD_ID: request.workloadId,
    OPENAI4S_ALLOCATION_ID: request.allocationId,
    OPENAI4S_EPOCH: String(request.epoch),
  };
  // HOME is the workspace: the one place the job owns and can write. The daemon's HOME is
  // not there in the sandbox (pip, matplotlib and jupyter then failed writing their caches),
  // and as root it would be root's.
  const base = { ...baseEnv, HOME: request.workspaceDir };
  switch (launch.kind) {
    case "COMMAND":
      return { argv: launch.command, env: { ...base, ...launch.env, ...own }, credentialDir: null };
    case "WORKER":
      return {
        argv: [
          ...launch.workerCommand,
          "--rank-env",
          RANK_ENV,
          ...(socket === null ? [] : ["--gateway-socket", socket]),
        ],
        env: { ...base, ...launch.env, ...own, [RANK_ENV]: "0" },
        credentialDir: launch.credentialDir,
      };
    default: {
      const unreachable: never = launch;
      throw new Error(`unknown launch ${JSON.stringify(unreachable)}`);
    }
  }
}

/**
 * The workspace writable, the credential directory read-only, the allocation's shared /tmp
 * and /dev/shm when it has them; the rest of the allocation directory (logs the supervisor
 * writes, records the daemon reads) is not exposed at all.
 */
export function sandboxPaths(
  workspaceDir: string,
  credentialDir: string | null,
  sandboxReadOnly: readonly string[],
  sharedTmp: string | null = null,
): SandboxPaths {
  return {
    writable: [workspaceDir],
    readOnly: unique([...(credentialDir === null ? [] : [credentialDir]), ...sandboxReadOnly]),
    ...(sharedTmp === null ? {} : { nodeTmp: sharedTmp }),
  };
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}
