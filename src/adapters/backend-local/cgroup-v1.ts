/**
 * The cgroup v1 adapter: one hierarchy per controller (memory, pids, cpu), so a job's cgroup
 * is three directories of the same name and a process joins it by writing its pid into each.
 * v1 has no group OOM kill: the kernel kills one process, and the supervisor ends the rest
 * when it sees the kill count move (see supervisor-limits.ts).
 */
import { join } from "node:path";
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

/** This daemon's root directory in each controller's hierarchy. */
export interface V1Roots {
  /** Where the controllers' hierarchies are mounted (normally /sys/fs/cgroup). */
  readonly mount: string;
  readonly memory: string;
  readonly pids: string;
  readonly cpu: string;
}

export function createCgroupV1(roots: V1Roots): CgroupDriver {
  const order = [roots.memory, roots.pids, roots.cpu] as const;
  const parts = (job: JobCgroup) => {
    const [memory, pids, cpu] = job.dirs;
    if (job.version !== "v1" || memory === undefined || pids === undefined || cpu === undefined) {
      throw new Error(`not a v1 job cgroup: ${JSON.stringify(job)}`);
    }
    return { memory, pids, cpu };
  };
  return {
    version: "v1",
    where: `${roots.memory}, ${roots.pids}, ${roots.cpu}`,
    jobCgroup: (name) => ({
      version: "v1",
      mount: roots.mount,
      dirs: order.map((root) => join(root, name)),
    }),
    jobNames: () => childDirs(roots.memory),
    create(job, limits: CgroupLimits) {
      const d = parts(job);
      for (const dir of job.dirs) ensureDir(dir);
      if (limits.memoryBytes !== null) {
        const bytes = String(limits.memoryBytes);
        writeControl(d.memory, "memory.limit_in_bytes", bytes);
        // With swap accounting on, memory+swap held to the same figure: no swapping past it.
        writeControlIfPresent(d.memory, "memory.memsw.limit_in_bytes", bytes);
      }
      writeControl(d.pids, "pids.max", String(limits.pidsMax));
      writeControl(d.cpu, "cpu.cfs_period_us", String(CPU_PERIOD_US));
      // -1: no quota.
      writeControl(d.cpu, "cpu.cfs_quota_us", String(cpuQuotaUs(limits.cpus) ?? -1));
    },
    usage(job): CgroupUsage {
      const d = parts(job);
      return {
        oomKills: readKeyed(d.memory, "memory.oom_control", "oom_kill"),
        peakMemoryBytes: readNumber(d.memory, "memory.max_usage_in_bytes"),
        pidsRefused: readKeyed(d.pids, "pids.events", "max"),
      };
    },
    processes: (job) => [...new Set(job.dirs.flatMap((dir) => pidsIn(dir)))],
    kill(job) {
      killPids([...new Set(job.dirs.flatMap((dir) => pidsIn(dir)))]);
    },
    removeRoot() {
      let gone = true;
      for (const dir of order) gone = removeDir(dir) && gone;
      return gone;
    },
    remove(job) {
      let gone = true;
      for (const dir of job.dirs) gone = removeDir(dir) && gone;
      return gone;
    },
  };
}
