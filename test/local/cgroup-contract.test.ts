/**
 * One contract for both cgroup adapters, run against whichever hierarchy this machine really
 * has: v1 (one hierarchy per controller, as on these machines) and v2 (most current
 * clusters). A version the machine lacks, or a daemon that may not create cgroups, skips
 * with a line saying so. Every case runs a real process in a real cgroup.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CgroupDriver, JobCgroup } from "../../src/adapters/backend-local/cgroup-port.ts";
import { sweepJobCgroups } from "../../src/adapters/backend-local/cgroup-sweep.ts";
import { limitArgv } from "../../src/adapters/backend-local/job-limits.ts";
import {
  cgroupDriver,
  detectLimitEnforcement,
  driverForJob,
} from "../../src/adapters/backend-local/limit-enforcement.ts";
import type { JobLimits } from "../../src/adapters/backend-local/records.ts";
import { silentLog } from "../../src/lib/log.ts";
import { eventually } from "../support/eventually.ts";
import { tempDirs } from "../support/temp-dir.ts";

const MOUNT = "/sys/fs/cgroup";
const backendDirs = tempDirs("o4s-cgroup-contract-");

function hasV2(): boolean {
  const controllers = existsSync(join(MOUNT, "cgroup.controllers"))
    ? readFileSync(join(MOUNT, "cgroup.controllers"), "utf8").split(/\s+/)
    : [];
  return ["memory", "pids", "cpu"].every((c) => controllers.includes(c));
}

function hasV1(): boolean {
  return ["memory", "pids", "cpu"].every((c) => existsSync(join(MOUNT, c, "cgroup.procs")));
}

/** The driver a daemon here would use, when it is this version and may create cgroups. */
function realDriver(version: "v1" | "v2"): CgroupDriver | string {
  const present = version === "v2" ? hasV2() : hasV1();
  if (!present) return `no cgroup ${version} with memory, pids and cpu on this machine`;
  const backendDir = backendDirs();
  const found = detectLimitEnforcement({ cgroupRoot: null, backendDir });
  if (found.kind !== "Cgroup") return `cannot create cgroups here: ${found.why}`;
  if (found.driver.version !== version)
    return `this machine's daemon would use ${found.driver.version}`;
  return found.driver;
}

function limitsFor(job: JobCgroup, memoryBytes: number, pidsMax: number): JobLimits {
  return {
    profile: "small",
    memoryBytes,
    pidsMax,
    cpus: 1,
    cgroup: { ...job, dirs: [...job.dirs] },
    rlimit: false,
    moreMemoryProfile: null,
  };
}

/** Runs `script` in the job's cgroup exactly as a launch would (the join shell first). */
function runIn(limits: JobLimits, script: string) {
  return Bun.spawn([...limitArgv(limits, ["/bin/sh", "-c", script])], {
    stdio: ["ignore", "pipe", "pipe"],
  });
}

for (const version of ["v1", "v2"] as const) {
  const driver = realDriver(version);
  if (typeof driver === "string") {
    describe(`cgroup ${version} contract`, () => {
      test.skip(`skipped: ${driver}`, () => {});
    });
    console.log(`cgroup ${version} contract skipped: ${driver}`);
    continue;
  }
  describe(`cgroup ${version} contract`, () => {
    // The daemon's root is this test's: nothing of it may outlive the run.
    afterAll(() => {
      expect(driver.removeRoot()).toBe(true);
    });

    test("a joined process is in it, counted, killed, and the cgroup removed after", async () => {
      const job = driver.jobCgroup("contract-join");
      const limits = limitsFor(job, 256 * 1024 ** 2, 64);
      driver.create(job, limits);
      try {
        expect(driver.jobNames()).toContain("contract-join");
        const proc = runIn(limits, "sleep 30 & sleep 30 & wait");
        const pids = await eventually(
          () => driver.processes(job).length >= 3 && driver.processes(job),
        );
        expect(pids).toContain(proc.pid);
        // Busy: a cgroup with processes in it cannot go.
        expect(driver.remove(job)).toBe(false);
        driver.kill(job);
        await proc.exited;
        await eventually(() => driver.processes(job).length === 0);
        expect(driver.remove(job)).toBe(true);
        expect(driver.jobNames()).not.toContain("contract-join");
        // Gone counts as removed (the sweep and the supervisor may both try).
        expect(driver.remove(job)).toBe(true);
      } finally {
        driver.kill(job);
        await eventually(() => driver.remove(job));
      }
    }, 20_000);

    test("a process past the memory limit is OOM-killed and counted, with its peak", async () => {
      const job = driver.jobCgroup("contract-oom");
      const limits = limitsFor(job, 64 * 1024 ** 2, 64);
      driver.create(job, limits);
      try {
        // 512 MiB touched page by page: far past the 64 MiB limit, with no swap to hide in.
        const proc = runIn(
          limits,
          "exec python3 -c \"b = bytearray(512 * 1024 * 1024); print('survived')\"",
        );
        const out = await new Response(proc.stdout).text();
        await proc.exited;
        expect(out).not.toContain("survived");
        expect(proc.signalCode).toBe("SIGKILL");
        const usage = driver.usage(job);
        expect(usage.oomKills).toBeGreaterThanOrEqual(1);
        if (usage.peakMemoryBytes !== null) {
          expect(usage.peakMemoryBytes).toBeGreaterThan(32 * 1024 ** 2);
          expect(usage.peakMemoryBytes).toBeLessThanOrEqual(64 * 1024 ** 2);
        }
      } finally {
        driver.kill(job);
        await eventually(() => driver.remove(job));
      }
    }, 20_000);

    test("forks past pids.max are refused and counted; the job's figures never exceed it", async () => {
      const job = driver.jobCgroup("contract-pids");
      const limits = limitsFor(job, 256 * 1024 ** 2, 20);
      driver.create(job, limits);
      try {
        const proc = runIn(
          limits,
          "i=0; while [ $i -lt 100 ]; do sleep 30 >/dev/null 2>&1 & i=$((i+1)); done 2>/dev/null",
        );
        await proc.exited;
        expect(driver.usage(job).pidsRefused).toBeGreaterThan(0);
        expect(driver.processes(job).length).toBeLessThanOrEqual(20);
      } finally {
        driver.kill(job);
        await eventually(() => driver.remove(job));
      }
    }, 20_000);

    test("the start sweep removes this daemon's cgroups no job needs, and keeps the rest", async () => {
      const backendDir = backendDirs();
      const orphan = driver.jobCgroup("o4s-orphan");
      const unsure = driver.jobCgroup("o4s-unsure");
      driver.create(orphan, limitsFor(orphan, 64 * 1024 ** 2, 16));
      driver.create(unsure, limitsFor(unsure, 64 * 1024 ** 2, 16));
      // A job record that cannot be read is no proof its job is gone: its limits stay.
      mkdirSync(join(backendDir, "jobs", "o4s-unsure"), { recursive: true });
      writeFileSync(join(backendDir, "jobs", "o4s-unsure", "record.json"), "{not json");
      const left = runIn(limitsFor(orphan, 64 * 1024 ** 2, 16), "exec sleep 30");
      await eventually(() => driver.processes(orphan).length === 1);
      try {
        expect(await sweepJobCgroups(driver, backendDir, "boot", silentLog)).toBe(1);
        expect(driver.jobNames()).toEqual(["o4s-unsure"]);
        await left.exited;
      } finally {
        driver.kill(orphan);
        await eventually(() => driver.remove(orphan));
        expect(driver.remove(unsure)).toBe(true);
      }
    }, 20_000);

    test("the supervisor's driver, rebuilt from the recorded value, works on the same cgroup", async () => {
      const job = driver.jobCgroup("contract-recorded");
      const again = driverForJob(JSON.parse(JSON.stringify(job)) as JobCgroup);
      again.create(job, limitsFor(job, 128 * 1024 ** 2, 32));
      try {
        expect(driver.jobNames()).toContain("contract-recorded");
        expect(again.usage(job)).toEqual(driver.usage(job));
      } finally {
        expect(again.remove(job)).toBe(true);
      }
    });
  });
}

describe("choosing an adapter", () => {
  test("the unified hierarchy with the three controllers is v2; per-controller mounts are v1", () => {
    const fake = backendDirs();
    const v2Mount = join(fake, "v2");
    const v1Mount = join(fake, "v1");
    Bun.spawnSync([
      "mkdir",
      "-p",
      v2Mount,
      ...["memory", "pids", "cpu"].map((c) => join(v1Mount, c)),
    ]);
    Bun.write(join(v2Mount, "cgroup.controllers"), "cpuset cpu io memory pids\n");
    for (const c of ["memory", "pids", "cpu"]) Bun.write(join(v1Mount, c, "cgroup.procs"), "");
    const self = join(fake, "self-cgroup");
    Bun.write(self, "4:memory:/svc/a\n8:pids:/\n1:cpu,cpuacct:/svc\n0::/\n");
    const options = { cgroupRoot: null, backendDir: "/state/backends/local", selfCgroupFile: self };
    const v2 = cgroupDriver({ ...options, mount: v2Mount });
    const v1 = cgroupDriver({ ...options, mount: v1Mount });
    expect(v2.kind === "Driver" && v2.driver.version).toBe("v2");
    expect(v1.kind === "Driver" && v1.driver.version).toBe("v1");
    // v1: below the daemon's own cgroup in each hierarchy.
    const dirs = v1.kind === "Driver" ? v1.driver.jobCgroup("T").dirs : [];
    expect(dirs[0]).toMatch(new RegExp(`^${v1Mount}/memory/svc/a/openai4s-[0-9a-f]{12}/T$`));
    expect(dirs[1]).toMatch(new RegExp(`^${v1Mount}/pids/openai4s-[0-9a-f]{12}/T$`));
    expect(dirs[2]).toMatch(new RegExp(`^${v1Mount}/cpu/svc/openai4s-[0-9a-f]{12}/T$`));
    // Two daemons (two backend dirs) never share a root.
    const other = cgroupDriver({ ...options, mount: v2Mount, backendDir: "/other/backends/local" });
    expect(other.kind === "Driver" && other.driver.where).not.toBe(
      v2.kind === "Driver" && v2.driver.where,
    );
    // A delegated subtree named by the admin.
    const delegated = cgroupDriver({
      ...options,
      mount: v2Mount,
      cgroupRoot: "/user.slice/o4s",
    });
    expect(delegated.kind === "Driver" && delegated.driver.where).toMatch(
      new RegExp(`^${v2Mount}/user.slice/o4s/openai4s-`),
    );
  });

  test("no cgroups: rlimits through prlimit when it is there, else none; each says why", () => {
    const fake = backendDirs();
    const base = {
      cgroupRoot: null,
      backendDir: "/state/backends/local",
      mount: join(fake, "nothing"),
    };
    const rlimit = detectLimitEnforcement({ ...base, prlimitPath: "/bin/sh" });
    expect(rlimit.kind).toBe("Rlimit");
    expect(rlimit.kind === "Rlimit" && rlimit.why).toContain("no memory, pids and cpu controllers");
    const none = detectLimitEnforcement({ ...base, prlimitPath: join(fake, "no-prlimit") });
    expect(none.kind).toBe("None");
    const off = detectLimitEnforcement({
      ...base,
      mount: MOUNT,
      cgroupRoot: "off",
      prlimitPath: "/bin/sh",
    });
    expect(off.kind === "Rlimit" && off.why).toBe("OPENAI4S_CGROUP_ROOT=off");
  });
});
