/**
 * The cgroup v2 adapter: one unified hierarchy, so a job's cgroup is one directory. The
 * controllers must be enabled in `cgroup.subtree_control` of every ancestor from the
 * hierarchy's root down to this daemon's root; `memory.oom.group` makes an OOM kill end the
 * whole job (as a scheduler ends a whole step), and `cgroup.kill` (Linux 5.14) kills it.
 */
import { existsSync } from "node:fs";
import { join, relative } from "node:path";
import {
  CPU_PERIOD_US,
  childDirs,
  cpuQuotaUs,
  ensureDir,
  killPids,
  pidsIn,
  readKeyed,
  readNumber,
  removeDir,
  writeControl,
  writeControlIfPresent,
} from "./cgroup-files.ts";
import type { CgroupDriver, CgroupLimits, CgroupUsage, JobCgroup } from "./cgroup-port.ts";

const CONTROLLERS = "+memory +pids +cpu";

export interface V2Roots {
  /** Where the unified hierarchy is mounted (normally /sys/fs/cgroup). */
  readonly mount: string;
  /** This daemon's root, below `mount`. */
  readonly root: string;
}

export function createCgroupV2(roots: V2Roots): CgroupDriver {
  const dirOf = (job: JobCgroup): string => {
    const [dir] = job.dirs;
    if (job.version !== "v2" || dir === undefined || job.dirs.length !== 1) {
      throw new Error(`not a v2 job cgroup: ${JSON.stringify(job)}`);
    }
    return dir;
  };
  /** Every ancestor of the job, from the mount down to the daemon root, delegates. */
  function enableControllers(): void {
    const steps = relative(roots.mount, roots.root).split("/").filter(Boolean);
    let dir = roots.mount;
    for (const step of [...steps, null]) {
      writeControl(dir, "cgroup.subtree_control", CONTROLLERS);
      if (step === null) break;
      dir = join(dir, step);
      ensureDir(dir);
    }
  }
  return {
    version: "v2",
    where: roots.root,
    jobCgroup: (name) => ({ version: "v2", mount: roots.mount, dirs: [join(roots.root, name)] }),
    jobNames: () => childDirs(roots.root),
    create(job, limits: CgroupLimits) {
      const dir = dirOf(job);
      if (!existsSync(dir)) enableControllers();
      ensureDir(dir);
      if (limits.memoryBytes !== null) {
        writeControl(dir, "memory.max", String(limits.memoryBytes));
        writeControlIfPresent(dir, "memory.swap.max", "0");
        writeControl(dir, "memory.oom.group", "1");
      }
      writeControl(dir, "pids.max", String(limits.pidsMax));
      writeControl(dir, "cpu.max", `${cpuQuotaUs(limits.cpus) ?? "max"} ${CPU_PERIOD_US}`);
    },
    usage(job): CgroupUsage {
      const dir = dirOf(job);
      return {
        oomKills: readKeyed(dir, "memory.events", "oom_kill"),
        peakMemoryBytes: readNumber(dir, "memory.peak"),
        pidsRefused: readKeyed(dir, "pids.events", "max"),
      };
    },
    processes: (job) => pidsIn(dirOf(job)),
    kill(job) {
      const dir = dirOf(job);
      if (existsSync(join(dir, "cgroup.kill"))) writeControl(dir, "cgroup.kill", "1");
      else killPids(pidsIn(dir));
    },
    remove: (job) => removeDir(dirOf(job)),
    removeRoot: () => removeDir(roots.root),
  };
}
