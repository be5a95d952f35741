/**
 * A job array on this machine, the pure half: which requests the backend refuses (whatever
 * admission let through), how many elements run at once by default, and the record an array
 * gets (its index inherited by name, its argv left for each element's own cgroup).
 */
import { describe, expect, test } from "bun:test";
import { arrayConcurrency } from "../../src/adapters/backend-local/array-launch.ts";
import { buildJobRecord, validateLaunch } from "../../src/adapters/backend-local/launch.ts";
import { plainWrapper } from "../../src/adapters/isolation-bwrap/launch-argv.ts";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import { type ResourceProfile, submissionToken } from "../../src/core/models.ts";
import type { SubmitRequest } from "../../src/core/ports/allocation-backend.ts";

function profile(fields: Partial<ResourceProfile> = {}): ResourceProfile {
  return {
    name: "p",
    description: "p",
    kinds: ["BATCH", "SESSION"],
    resources: { nodes: 1, cpus: 2, gpus: 0, memoryMb: 1024, timeLimitSeconds: null },
    maxArraySize: 10,
    ...fields,
  };
}

function withoutArrays(): ResourceProfile {
  const { maxArraySize: _, ...rest } = profile();
  return rest;
}

function request(array: SubmitRequest["array"], env: Record<string, string> = {}): SubmitRequest {
  return {
    token: submissionToken("o4s-abcdefghijklmnopqrstuvwxyz"),
    workloadId: "w1",
    allocationId: "a1",
    epoch: 1,
    workloadKind: "BATCH",
    profile: "p",
    name: "sweep",
    timeLimitSeconds: null,
    allocationDir: "/spool/w1/a1",
    workspaceDir: "/spool/w1/workspace",
    launch: { kind: "COMMAND", command: ["python3", "sweep.py"], env },
    ...(array === undefined ? {} : { array }),
  };
}

describe("an array the local backend refuses", () => {
  test.each([
    [
      "a profile without a limit",
      withoutArrays(),
      { size: 2, maxConcurrent: null },
      {},
      "profile p runs no job arrays",
    ],
    [
      "over the profile's limit",
      profile(),
      { size: 11, maxConcurrent: null },
      {},
      "array must be an integer number of elements in 1..10",
    ],
    [
      "a cap over the size",
      profile(),
      { size: 3, maxConcurrent: 4 },
      {},
      "maxConcurrent must be an integer in 1..3",
    ],
    [
      "its index given as a variable",
      profile(),
      { size: 3, maxConcurrent: null },
      { OPENAI4S_ARRAY_INDEX: "7" },
      "OPENAI4S_ARRAY_INDEX is set per element",
    ],
  ] as const)("%s", (_what, p, array, env, why) => {
    expect(validateLaunch(request(array, env), [p], false)).toContain(why);
  });

  test("an array that fits is accepted, and a single job is as before", () => {
    expect(validateLaunch(request({ size: 10, maxConcurrent: 3 }), [profile()], false)).toBeNull();
    expect(validateLaunch(request(undefined), [withoutArrays()], false)).toBeNull();
  });
});

describe("how many elements run at once", () => {
  const host = { cpus: 8, memoryMb: 16_384 };
  test("maxConcurrent as asked, whatever the machine", () => {
    expect(arrayConcurrency({ size: 50, maxConcurrent: 20 }, profile(), host)).toBe(20);
  });
  test("unsaid: as many as the machine holds by the profile's CPUs and memory, at least one", () => {
    expect(arrayConcurrency({ size: 50, maxConcurrent: null }, profile(), host)).toBe(4);
    const bigMemory = profile({ resources: { ...profile().resources, memoryMb: 8_192 } });
    expect(arrayConcurrency({ size: 50, maxConcurrent: null }, bigMemory, host)).toBe(2);
    expect(arrayConcurrency({ size: 3, maxConcurrent: null }, profile(), host)).toBe(3);
    const whole = profile({ resources: { ...profile().resources, cpus: 8, memoryMb: 20_000 } });
    expect(arrayConcurrency({ size: 50, maxConcurrent: null }, whole, host)).toBe(1);
  });
});

test("the record: the index inherited by name, the argv left for each element's cgroup", () => {
  const limits = {
    kind: "Cgroup" as const,
    driver: {
      jobCgroup: (name: string) => ({ version: "v2", mount: "/cg", dirs: [`/cg/o4s/${name}`] }),
    },
  } as never;
  const record = buildJobRecord(
    request({ size: 5, maxConcurrent: null }),
    {
      wrapper: plainWrapper(fixedIdentities(null)),
      baseEnv: { PATH: "/usr/bin:/bin" },
      profiles: [profile()],
      killGraceMs: 100,
      sandboxReadOnly: [],
      now: 0,
      limits,
      host: { cpus: 4, memoryMb: 4_096 },
    },
    null,
  );
  expect(record.array).toEqual({ size: 5, maxConcurrent: 2 });
  expect(record.argv.join(" ")).toContain("OPENAI4S_ARRAY_INDEX");
  expect(record.argv.join(" ")).not.toContain("cgroup.procs");
  expect(record.limits?.cgroup?.dirs).toEqual(["/cg/o4s/o4s-abcdefghijklmnopqrstuvwxyz"]);
});
