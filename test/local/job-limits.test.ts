/**
 * The pure half of per-job limits: what a profile turns into, the argv prefix that puts a
 * job under its limits (outermost, so the sandbox and the privilege drop are held too), the
 * out-of-memory ending and its hint, and the environment knobs of the local profiles.
 */
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { totalmem } from "node:os";
import { join } from "node:path";
import { createCgroupV1 } from "../../src/adapters/backend-local/cgroup-v1.ts";
import {
  jobLimitsFor,
  limitArgv,
  moreMemoryProfile,
  outOfMemoryMessage,
  pidsNote,
} from "../../src/adapters/backend-local/job-limits.ts";
import { exitObservation } from "../../src/adapters/backend-local/job-state.ts";
import { buildJobRecord, validateLaunch } from "../../src/adapters/backend-local/launch.ts";
import { ownV1Paths } from "../../src/adapters/backend-local/limit-enforcement.ts";
import type { JobLimits } from "../../src/adapters/backend-local/records.ts";
import { plainWrapper } from "../../src/adapters/isolation-bwrap/launch-argv.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { DEFAULT_PIDS_MAX, type ResourceProfile, submissionToken } from "../../src/core/models.ts";
import type { SubmitRequest } from "../../src/core/ports/allocation-backend.ts";
import { hintFor } from "../../src/core/reason-hints.ts";
import { localProfilesFromEnv } from "../support/local-profiles.ts";
import { tempDirs } from "../support/temp-dir.ts";

const dirs = tempDirs("o4s-job-limits-");

function profile(name: string, memoryMb: number | null, pidsMax?: number): ResourceProfile {
  return {
    name,
    description: name,
    kinds: ["BATCH", "SESSION"],
    resources: { nodes: 1, cpus: 2, gpus: 0, memoryMb, timeLimitSeconds: null },
    ...(pidsMax === undefined ? {} : { pidsMax }),
  };
}

const PROFILES = [
  profile("small", 512, 100),
  profile("big", 8192),
  profile("mid", 2048),
  profile("open", null),
];
const V1 = createCgroupV1({
  mount: "/sys/fs/cgroup",
  memory: "/sys/fs/cgroup/memory/svc/openai4s-x",
  pids: "/sys/fs/cgroup/pids/openai4s-x",
  cpu: "/sys/fs/cgroup/cpu/openai4s-x",
});

describe("a profile's limits", () => {
  test("figures from the profile; the default pids limit when it names none", () => {
    const small = jobLimitsFor("tok", PROFILES[0] as ResourceProfile, PROFILES, {
      kind: "Cgroup",
      driver: V1,
    });
    expect(small).toMatchObject({
      memoryBytes: 512 * 1024 ** 2,
      pidsMax: 100,
      cpus: 2,
      rlimit: false,
    });
    expect(small.cgroup?.dirs).toEqual([
      "/sys/fs/cgroup/memory/svc/openai4s-x/tok",
      "/sys/fs/cgroup/pids/openai4s-x/tok",
      "/sys/fs/cgroup/cpu/openai4s-x/tok",
    ]);
    const open = jobLimitsFor("tok", PROFILES[3] as ResourceProfile, PROFILES, {
      kind: "Rlimit",
      prlimit: "/usr/bin/prlimit",
      why: "test",
    });
    expect(open).toMatchObject({
      memoryBytes: null,
      pidsMax: DEFAULT_PIDS_MAX,
      cgroup: null,
      rlimit: true,
    });
  });

  test("the profile to move to is the smallest with more memory, none past the biggest", () => {
    expect(moreMemoryProfile(PROFILES[0] as ResourceProfile, PROFILES)).toBe("mid");
    expect(moreMemoryProfile(PROFILES[1] as ResourceProfile, PROFILES)).toBeNull();
  });
});

function limits(overrides: Partial<JobLimits> = {}): JobLimits {
  return {
    profile: "small",
    memoryBytes: 512 * 1024 ** 2,
    pidsMax: 100,
    cpus: 2,
    cgroup: null,
    rlimit: false,
    moreMemoryProfile: "mid",
    ...overrides,
  };
}

describe("the argv under limits", () => {
  test("cgroup: the join shell first, every hierarchy's procs file, then the launch", () => {
    const cgroup = {
      version: "v1" as const,
      mount: "/sys/fs/cgroup",
      dirs: ["/m/t", "/p/t", "/c/t"],
    };
    const argv = limitArgv(limits({ cgroup }), ["bwrap", "--", "job"]);
    expect(argv.slice(0, 2)).toEqual(["/bin/sh", "-c"]);
    expect(argv.slice(3)).toEqual([
      "openai4s-cgroup",
      "/m/t/cgroup.procs",
      "/p/t/cgroup.procs",
      "/c/t/cgroup.procs",
      "--",
      "bwrap",
      "--",
      "job",
    ]);
  });

  test("rlimits: prlimit with RLIMIT_NPROC and RLIMIT_AS; no memory figure, no RLIMIT_AS", () => {
    expect(limitArgv(limits({ rlimit: true }), ["job"])).toEqual([
      "/usr/bin/prlimit",
      "--nproc=100",
      `--as=${512 * 1024 ** 2}`,
      "--",
      "job",
    ]);
    expect(limitArgv(limits({ rlimit: true, memoryBytes: null }), ["job"])).toEqual([
      "/usr/bin/prlimit",
      "--nproc=100",
      "--",
      "job",
    ]);
    expect(limitArgv(limits(), ["job"])).toEqual(["job"]);
    expect(limitArgv(undefined, ["job"])).toEqual(["job"]);
  });

  test("a join that fails stops the launch (exit 126): never a job without its limits", () => {
    const dir = dirs();
    const cgroup = { version: "v2" as const, mount: dir, dirs: [join(dir, "missing")] };
    const marker = join(dir, "ran");
    const argv = limitArgv(limits({ cgroup }), ["/bin/sh", "-c", `touch ${marker}`]);
    const r = Bun.spawnSync([...argv], { stdio: ["ignore", "ignore", "ignore"] });
    expect(r.exitCode).toBe(126);
    expect(existsSync(marker)).toBe(false);
  });

  test("the job record's argv starts with the limits, outside the privilege drop", () => {
    const request: SubmitRequest = {
      token: submissionToken("o4s-abcdefghijklmnopqrstuvwxyz"),
      workloadId: "w1",
      allocationId: "a1",
      epoch: 1,
      workloadKind: "BATCH",
      profile: "small",
      timeLimitSeconds: null,
      allocationDir: "/spool/w1/a1",
      workspaceDir: "/spool/w1/workspace",
      launch: { kind: "COMMAND", command: ["python3"], env: {} },
    } as unknown as SubmitRequest;
    const nobody = { uid: 65534, gid: 65534, label: "nobody" };
    const record = buildJobRecord(
      request,
      {
        wrapper: plainWrapper(fixedIdentities(nobody)),
        baseEnv: { PATH: "/usr/bin" },
        profiles: PROFILES,
        killGraceMs: 1000,
        sandboxReadOnly: [],
        now: 0,
        limits: { kind: "Cgroup", driver: V1 },
      },
      nobody,
    );
    expect(record.argv[0]).toBe("/bin/sh");
    expect(record.argv.indexOf("/usr/bin/setpriv")).toBeGreaterThan(record.argv.indexOf("--"));
    expect(record.limits?.cgroup?.version).toBe("v1");
  });
});

describe("per-workload resources (issue 35)", () => {
  const roomy: ResourceProfile = {
    ...profile("roomy", 512),
    maxima: { cpus: 2, memoryMb: 1024 },
  };
  const asking = (resources: SubmitRequest["resources"]): SubmitRequest =>
    ({
      token: submissionToken("o4s-abcdefghijklmnopqrstuvwxyz"),
      workloadId: "w1",
      allocationId: "a1",
      epoch: 1,
      workloadKind: "BATCH",
      profile: "roomy",
      name: "job",
      timeLimitSeconds: null,
      allocationDir: "/spool/w1/a1",
      workspaceDir: "/spool/w1/workspace",
      launch: { kind: "COMMAND", command: ["python3"], env: {} },
      ...(resources === undefined ? {} : { resources }),
    }) as SubmitRequest;
  const limitsOf = (request: SubmitRequest) =>
    buildJobRecord(
      request,
      {
        wrapper: plainWrapper(fixedIdentities({ uid: 65534, gid: 65534, label: "nobody" })),
        baseEnv: { PATH: "/usr/bin" },
        profiles: [roomy],
        killGraceMs: 1000,
        sandboxReadOnly: [],
        now: 0,
        limits: { kind: "Cgroup", driver: V1 },
      },
      null,
    ).limits;

  test("the job's cgroup holds it to what it asked, else to the profile's defaults", () => {
    expect(limitsOf(asking({ memoryMb: 300, cpus: 1 }))).toMatchObject({
      memoryBytes: 300 * 1024 ** 2,
      cpus: 1,
    });
    expect(limitsOf(asking({ memoryMb: 1024 }))).toMatchObject({
      memoryBytes: 1024 ** 3,
      cpus: 2,
    });
    expect(limitsOf(asking(undefined))).toMatchObject({ memoryBytes: 512 * 1024 ** 2, cpus: 2 });
  });

  test("a request over a maximum that got past admission is refused here, never run", () => {
    expect(validateLaunch(asking({ memoryMb: 1025 }), [roomy], true)).toBe(
      'resources.memoryMb: profile "roomy" allows at most 1024 MB of memory per node (asked 1025)',
    );
    expect(validateLaunch(asking({ memoryMb: 1024 }), [roomy], true)).toBeNull();
  });
});

describe("an out-of-memory ending", () => {
  const usage = { oomKills: 1, peakMemoryBytes: 510 * 1024 ** 2, pidsRefused: 0 };

  test("FAILED/OUT_OF_MEMORY, and its hint says used of asked and where to go", () => {
    const message = outOfMemoryMessage(limits(), usage);
    const observed = exitObservation({
      reason: "OUT_OF_MEMORY",
      exitCode: null,
      signal: "SIGKILL",
      message,
      startedAt: 1,
      endedAt: 2,
    });
    expect(observed).toMatchObject({ phase: "FAILED", reason: "OUT_OF_MEMORY", exitCode: 137 });
    expect(hintFor("OUT_OF_MEMORY", message)).toBe(
      "used 510 MiB of the 512 MiB asked for (profile small): ask for more memory (profile with more memory: mid)",
    );
  });

  test("no bigger profile, or no peak figure: still a sentence that says what to do", () => {
    const message = outOfMemoryMessage(limits({ moreMemoryProfile: null }), {
      ...usage,
      peakMemoryBytes: null,
    });
    expect(hintFor("OUT_OF_MEMORY", message)).toBe(
      "killed at its memory limit of 512 MiB (profile small): no profile here has more memory than small: use less, or ask an administrator",
    );
  });

  test("forks refused at the pids limit are named in the ending's message", () => {
    expect(pidsNote(limits(), { ...usage, pidsRefused: 7 })).toBe(
      " (7 process starts refused at its limit of 100 processes)",
    );
    expect(pidsNote(limits(), usage)).toBe("");
  });
});

describe("the local profiles' knobs", () => {
  test("defaults: a memory size below the machine's, 4,096 processes, host network", () => {
    const r = localProfilesFromEnv({});
    if (r.kind !== "Valid") throw new Error(r.message);
    const [p] = r.profiles;
    expect(p?.resources.memoryMb).toBeGreaterThan(0);
    expect(p?.resources.memoryMb).toBeLessThan(totalmem() / 1024 ** 2);
    expect([p?.pidsMax, p?.network]).toEqual([4096, "host"]);
  });

  test("set by the environment", () => {
    const r = localProfilesFromEnv({
      OPENAI4S_LOCAL_MEMORY_MB: "300",
      OPENAI4S_LOCAL_PIDS_MAX: "64",
      OPENAI4S_LOCAL_NETWORK: "none",
    });
    if (r.kind !== "Valid") throw new Error(r.message);
    const [p] = r.profiles;
    expect([p?.resources.memoryMb, p?.pidsMax, p?.network]).toEqual([300, 64, "none"]);
  });

  test("a value that is not what the knob takes is refused, naming the knob", () => {
    for (const [name, bad] of [
      ["OPENAI4S_LOCAL_MEMORY_MB", "2G"],
      ["OPENAI4S_LOCAL_MEMORY_MB", "0"],
      ["OPENAI4S_LOCAL_PIDS_MAX", "1.5"],
      ["OPENAI4S_LOCAL_PIDS_MAX", "3"],
      ["OPENAI4S_LOCAL_NETWORK", "off"],
    ] as const) {
      const r = localProfilesFromEnv({ [name]: bad });
      expect(r.kind === "ConfigError" && r.message).toContain(`${name}=${JSON.stringify(bad)}`);
    }
  });
});

test("the daemon's own v1 cgroup per controller, from /proc/self/cgroup", () => {
  const paths = ownV1Paths("4:memory:/svc/a\n1:cpu,cpuacct:/svc\n0::/\nnot a line\n");
  expect(Object.fromEntries(paths)).toEqual({ memory: "/svc/a", cpu: "/svc", cpuacct: "/svc" });
});
