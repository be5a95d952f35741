/**
 * How this machine holds a local job to its profile, found once at start:
 *  - a cgroup per allocation (v2, or v1 where the controllers are mounted one per
 *    hierarchy) when the daemon may create them: it is root, or the admin delegated a subtree
 *    and named it in OPENAI4S_CGROUP_ROOT;
 *  - otherwise rlimits through util-linux's `prlimit`: RLIMIT_NPROC (counted per uid, so
 *    shared by every job of that uid) and RLIMIT_AS (address space, not resident memory);
 *  - otherwise nothing, said in diagnostics.
 * A probe cgroup is created with limits and removed, so "in force" means "written once".
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, join, normalize } from "node:path";
import type { CgroupDriver, JobCgroup } from "./cgroup-port.ts";
import { createCgroupV1 } from "./cgroup-v1.ts";
import { createCgroupV2 } from "./cgroup-v2.ts";

export const CGROUP_ROOT_ENV = "OPENAI4S_CGROUP_ROOT";
const PRLIMIT = "/usr/bin/prlimit";
const V1_CONTROLLERS = ["memory", "pids", "cpu"] as const;
const V2_CONTROLLERS = ["memory", "pids", "cpu"] as const;

export type LimitEnforcement =
  | { readonly kind: "Cgroup"; readonly driver: CgroupDriver }
  | { readonly kind: "Rlimit"; readonly prlimit: string; readonly why: string }
  | { readonly kind: "None"; readonly why: string };

export interface DetectOptions {
  /** `OPENAI4S_CGROUP_ROOT` as the admin wrote it (the daemon's settings); null: unset. */
  readonly cgroupRoot: string | null;
  /** The backend's private dir: names this daemon's cgroups, so two daemons never share. */
  readonly backendDir: string;
  readonly mount?: string;
  readonly selfCgroupFile?: string;
  readonly prlimitPath?: string;
}

/** One line for diagnostics and the start log. */
export function describeEnforcement(e: LimitEnforcement): string {
  switch (e.kind) {
    case "Cgroup":
      return `cgroup ${e.driver.version} per job (memory, pids, cpu) under ${e.driver.where}`;
    case "Rlimit":
      return `rlimits only (RLIMIT_NPROC per uid, RLIMIT_AS) via prlimit: ${e.why}`;
    case "None":
      return `NO per-job limits: ${e.why}`;
    default: {
      const never: never = e;
      throw new Error(`unhandled enforcement ${JSON.stringify(never)}`);
    }
  }
}

export function detectLimitEnforcement(options: DetectOptions): LimitEnforcement {
  const found = cgroupDriver(options);
  if (found.kind === "Driver") {
    try {
      probe(found.driver);
      return { kind: "Cgroup", driver: found.driver };
    } catch (error) {
      return fallback(
        options,
        `cannot create cgroups under ${found.driver.where}: ${String(error)}`,
      );
    }
  }
  return fallback(options, found.why);
}

function fallback(options: DetectOptions, why: string): LimitEnforcement {
  const prlimit = options.prlimitPath ?? PRLIMIT;
  if (existsSync(prlimit)) return { kind: "Rlimit", prlimit, why };
  return { kind: "None", why: `${why}; and no ${prlimit} for rlimits` };
}

type Found =
  | { readonly kind: "Driver"; readonly driver: CgroupDriver }
  | { readonly kind: "NoCgroups"; readonly why: string };

/** The adapter for this machine's hierarchy, rooted where this daemon's jobs go. */
export function cgroupDriver(options: DetectOptions): Found {
  const mount = options.mount ?? "/sys/fs/cgroup";
  const configured = options.cgroupRoot ?? undefined;
  if (configured === "off") return { kind: "NoCgroups", why: `${CGROUP_ROOT_ENV}=off` };
  if (configured !== undefined && configured !== "" && !isAbsolute(configured)) {
    return { kind: "NoCgroups", why: `${CGROUP_ROOT_ENV} must be absolute, inside the hierarchy` };
  }
  const daemonId = createHash("sha256").update(options.backendDir).digest("hex").slice(0, 12);
  const below = (base: string) => join(normalize(base), `openai4s-${daemonId}`);
  const unified = readOr(join(mount, "cgroup.controllers"), "").split(/\s+/);
  if (V2_CONTROLLERS.every((c) => unified.includes(c))) {
    const base = configured !== undefined && configured !== "" ? configured : "/openai4s";
    return { kind: "Driver", driver: createCgroupV2({ mount, root: join(mount, below(base)) }) };
  }
  if (!V1_CONTROLLERS.every((c) => existsSync(join(mount, c, "cgroup.procs")))) {
    return { kind: "NoCgroups", why: `no memory, pids and cpu controllers under ${mount}` };
  }
  // v1 default: below the daemon's own cgroup in each hierarchy, so whatever holds the
  // daemon (a service's limits) holds its jobs too.
  const own = ownV1Paths(readOr(options.selfCgroupFile ?? "/proc/self/cgroup", ""));
  const rootOf = (c: (typeof V1_CONTROLLERS)[number]) =>
    join(
      mount,
      c,
      below(configured !== undefined && configured !== "" ? configured : (own.get(c) ?? "/")),
    );
  return {
    kind: "Driver",
    driver: createCgroupV1({
      mount,
      memory: rootOf("memory"),
      pids: rootOf("pids"),
      cpu: rootOf("cpu"),
    }),
  };
}

/** `N:memory:/a/b` lines: the path per v1 controller (a line may list several). */
export function ownV1Paths(text: string): ReadonlyMap<string, string> {
  const paths = new Map<string, string>();
  for (const line of text.split("\n")) {
    const match = /^[0-9]+:([^:]*):(\/.*)$/.exec(line);
    if (match === null) continue;
    for (const c of (match[1] ?? "").split(",")) if (c !== "") paths.set(c, match[2] ?? "/");
  }
  return paths;
}

function probe(driver: CgroupDriver): void {
  const job = driver.jobCgroup(`.probe-${process.pid}`);
  driver.create(job, { memoryBytes: 64 * 1024 * 1024, pidsMax: 16, cpus: 1 });
  if (!driver.remove(job)) throw new Error("the probe cgroup could not be removed");
  // Made again by the first job: a daemon that never runs one (or is killed) leaves nothing.
  driver.removeRoot();
}

/** The adapter for a job cgroup recorded earlier (the supervisor's side). */
export function driverForJob(job: JobCgroup): CgroupDriver {
  const parent = (i: number) => dirname(job.dirs[i] ?? "/");
  return job.version === "v2"
    ? createCgroupV2({ mount: job.mount, root: parent(0) })
    : createCgroupV1({ mount: job.mount, memory: parent(0), pids: parent(1), cpu: parent(2) });
}

function readOr(path: string, fallbackText: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return fallbackText;
  }
}
