/**
 * The cgroup port: what the local backend asks of the kernel's control groups to hold one
 * allocation to its profile (memory, processes, CPU). Two adapters of the same shape: cgroup
 * v2 (cgroup-v2.ts, most current clusters) and v1 (cgroup-v1.ts, one hierarchy per
 * controller). A job cgroup is a plain value (`JobCgroup`) written into the job record, so
 * the supervisor, a separate process, works on exactly the directories the backend chose.
 */

export type CgroupVersion = "v1" | "v2";

/** One allocation's cgroup: one directory (v2) or one per controller (v1: memory, pids, cpu). */
export interface JobCgroup {
  readonly version: CgroupVersion;
  /** Where the hierarchy is mounted (v2: controllers are delegated from here down). */
  readonly mount: string;
  readonly dirs: readonly string[];
}

/** The files a process writes its own pid into to join the job's cgroup (each hierarchy's). */
export function joinFiles(job: JobCgroup): readonly string[] {
  return job.dirs.map((dir) => `${dir}/cgroup.procs`);
}

export interface CgroupLimits {
  /** memory.max / memory.limit_in_bytes; null: none. Swap is held to zero alongside. */
  readonly memoryBytes: number | null;
  readonly pidsMax: number;
  /** CPU quota in CPUs per period (2 = two full CPUs); null: none. */
  readonly cpus: number | null;
}

/** What the kernel counted for one job cgroup. */
export interface CgroupUsage {
  /** Processes the kernel's OOM killer killed in it for its memory limit. */
  readonly oomKills: number;
  /** Its peak memory, when the kernel keeps one (v2 memory.peak needs Linux 5.19). */
  readonly peakMemoryBytes: number | null;
  /** fork()s refused at its pids limit. */
  readonly pidsRefused: number;
}

export interface CgroupDriver {
  readonly version: CgroupVersion;
  /** Where this daemon's job cgroups live, for diagnostics. */
  readonly where: string;
  /** The cgroup named `name` (a submission token) under this daemon's root; no I/O. */
  jobCgroup(name: string): JobCgroup;
  /** Names of the job cgroups that exist under this daemon's root (for the stale sweep). */
  jobNames(): readonly string[];
  /** Creates (or finds) the job's cgroup and writes its limits. Throws on any failure. */
  create(job: JobCgroup, limits: CgroupLimits): void;
  usage(job: JobCgroup): CgroupUsage;
  /** Pids still in it. */
  processes(job: JobCgroup): readonly number[];
  /** SIGKILL to every process in it. */
  kill(job: JobCgroup): void;
  /** Removes it; false while a process is still in it. Absent counts as removed. */
  remove(job: JobCgroup): boolean;
  /** Removes this daemon's (empty) root; false while a job cgroup is in it. */
  removeRoot(): boolean;
}
