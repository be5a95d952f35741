/**
 * What each cgroup adapter writes and reads, file by file, on a plain directory tree shaped
 * like the kernel's: the one check of the v2 adapter's values on machines (like these) whose
 * v2 hierarchy has no controllers. The real-kernel contract is cgroup-contract.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCgroupV1 } from "../../src/adapters/backend-local/cgroup-v1.ts";
import { createCgroupV2 } from "../../src/adapters/backend-local/cgroup-v2.ts";
import { tempDirs } from "../support/temp-dir.ts";

const dirs = tempDirs("o4s-cgroup-files-");
const LIMITS = { memoryBytes: 256 * 1024 ** 2, pidsMax: 64, cpus: 1.5 };
const read = (dir: string, file: string) => readFileSync(join(dir, file), "utf8");

describe("v2", () => {
  test("controllers delegated down to the daemon's root; the job's limits, group OOM kill and no swap", () => {
    const mount = dirs();
    // The kernel makes these files; here they are made by hand, swap accounting included.
    writeFileSync(join(mount, "cgroup.subtree_control"), "");
    const root = join(mount, "openai4s", "openai4s-abc");
    const driver = createCgroupV2({ mount, root });
    const job = driver.jobCgroup("tok");
    mkdirSync(job.dirs[0] as string, { recursive: true });
    writeFileSync(join(job.dirs[0] as string, "memory.swap.max"), "max");
    // The job's directory exists, so only its own files are written; now from scratch:
    driver.create(job, LIMITS);
    const dir = job.dirs[0] as string;
    expect(read(dir, "memory.max")).toBe(String(256 * 1024 ** 2));
    expect(read(dir, "memory.swap.max")).toBe("0");
    expect(read(dir, "memory.oom.group")).toBe("1");
    expect(read(dir, "pids.max")).toBe("64");
    expect(read(dir, "cpu.max")).toBe("150000 100000");

    const fresh = driver.jobCgroup("second");
    driver.create(fresh, { memoryBytes: null, pidsMax: 16, cpus: null });
    for (const ancestor of [mount, join(mount, "openai4s"), root]) {
      expect(read(ancestor, "cgroup.subtree_control")).toBe("+memory +pids +cpu");
    }
    expect(read(fresh.dirs[0] as string, "cpu.max")).toBe("max 100000");
    expect(driver.jobNames()).toEqual(["second", "tok"]);
  });

  test("usage from memory.events, memory.peak and pids.events", () => {
    const mount = dirs();
    const driver = createCgroupV2({ mount, root: join(mount, "r") });
    const job = driver.jobCgroup("tok");
    const dir = job.dirs[0] as string;
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, "memory.events"),
      "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 1\n",
    );
    writeFileSync(join(dir, "memory.peak"), "268435456\n");
    writeFileSync(join(dir, "pids.events"), "max 7\n");
    expect(driver.usage(job)).toEqual({ oomKills: 2, peakMemoryBytes: 268435456, pidsRefused: 7 });
  });
});

describe("v1", () => {
  test("one directory per controller; memsw only where swap is accounted; the CFS quota", () => {
    const mount = dirs();
    const roots = {
      mount,
      memory: join(mount, "memory", "svc", "openai4s-abc"),
      pids: join(mount, "pids", "openai4s-abc"),
      cpu: join(mount, "cpu", "openai4s-abc"),
    };
    const driver = createCgroupV1(roots);
    const job = driver.jobCgroup("tok");
    const [memory, pids, cpu] = job.dirs as [string, string, string];
    mkdirSync(memory, { recursive: true });
    writeFileSync(join(memory, "memory.memsw.limit_in_bytes"), "");
    driver.create(job, LIMITS);
    expect(read(memory, "memory.limit_in_bytes")).toBe(String(256 * 1024 ** 2));
    expect(read(memory, "memory.memsw.limit_in_bytes")).toBe(String(256 * 1024 ** 2));
    expect(read(pids, "pids.max")).toBe("64");
    expect([read(cpu, "cpu.cfs_period_us"), read(cpu, "cpu.cfs_quota_us")]).toEqual([
      "100000",
      "150000",
    ]);
    writeFileSync(
      join(memory, "memory.oom_control"),
      "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
    );
    writeFileSync(join(memory, "memory.max_usage_in_bytes"), "1048576\n");
    writeFileSync(join(pids, "pids.events"), "max 0\n");
    expect(driver.usage(job)).toEqual({ oomKills: 3, peakMemoryBytes: 1048576, pidsRefused: 0 });
  });
});

describe("the CPU quota, one rule for both versions", () => {
  test("no quota when the profile sets no CPUs; never under 1 ms a period", () => {
    const mount = dirs();
    const v1 = createCgroupV1({
      mount,
      memory: join(mount, "memory", "o"),
      pids: join(mount, "pids", "o"),
      cpu: join(mount, "cpu", "o"),
    });
    writeFileSync(join(mount, "cgroup.subtree_control"), "");
    const v2 = createCgroupV2({ mount, root: join(mount, "o") });
    const quotas = (cpus: number | null) => {
      const name = `job-${String(cpus)}`.replace(".", "_");
      const one = v1.jobCgroup(name);
      const two = v2.jobCgroup(name);
      v1.create(one, { memoryBytes: null, pidsMax: 8, cpus });
      v2.create(two, { memoryBytes: null, pidsMax: 8, cpus });
      return [
        read(one.dirs[2] as string, "cpu.cfs_quota_us"),
        read(two.dirs[0] as string, "cpu.max"),
      ];
    };
    expect(quotas(null)).toEqual(["-1", "max 100000"]);
    expect(quotas(0.001)).toEqual(["1000", "1000 100000"]);
    expect(quotas(4)).toEqual(["400000", "400000 100000"]);
  });
});
