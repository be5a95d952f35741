/**
 * Where `run_as` is configured (issue 22): a cluster profile's `run_as` key and the local
 * profile's OPENAI4S_LOCAL_RUN_AS, each refused by name when it is neither "allocation" nor
 * "owner"; `GET /v1/profiles` says which; and an owner's job reaches sbatch as `--uid/--gid`
 * of that account, never of root.
 */
import { describe, expect, test } from "bun:test";
import {
  type BatchSpec,
  sbatchArgv,
  srunArgv,
} from "../../src/adapters/backend-slurm/broker-argv.ts";
import { parseClusterConfig } from "../../src/adapters/backend-slurm/profiles.ts";
import { profileView } from "../../src/servers/http/profiles/profile-view.ts";
import { localProfilesFromEnv } from "../support/local-profiles.ts";

const profile = (runAs: string) =>
  `[profiles.p]\ndescription = "d"\nallow_batch = true\nrun_as = "${runAs}"\n`;

describe("run_as in the configuration", () => {
  test("a cluster profile: owner, allocation, and nothing else", () => {
    const owner = parseClusterConfig(profile("owner"));
    if (owner.kind !== "Loaded") throw new Error(JSON.stringify(owner));
    expect(owner.profiles[0]?.public().runAs).toBe("owner");
    expect(profileView(owner.profiles[0]?.public() as never).runAs).toBe("owner");
    const allocation = parseClusterConfig(profile("allocation"));
    if (allocation.kind !== "Loaded") throw new Error(JSON.stringify(allocation));
    expect(profileView(allocation.profiles[0]?.public() as never).runAs).toBe("allocation");
    expect(parseClusterConfig(profile("root"))).toMatchObject({
      kind: "Refused",
      line: 4,
      message: expect.stringMatching(/profiles\.p\.run_as must be "allocation" or "owner"/),
    });
  });

  test("the local profile: OPENAI4S_LOCAL_RUN_AS", () => {
    const owner = localProfilesFromEnv({ OPENAI4S_LOCAL_RUN_AS: "owner" });
    if (owner.kind !== "Valid") throw new Error(owner.message);
    expect(owner.profiles.every((p) => p.runAs === "owner")).toBe(true);
    const unset = localProfilesFromEnv({});
    if (unset.kind !== "Valid") throw new Error(unset.message);
    expect(unset.profiles.every((p) => p.runAs === undefined)).toBe(true);
    expect(localProfilesFromEnv({ OPENAI4S_LOCAL_RUN_AS: "me" })).toEqual({
      kind: "ConfigError",
      message: 'OPENAI4S_LOCAL_RUN_AS="me": expected allocation or owner',
    });
  });
});

const SPEC: BatchSpec = {
  jobName: "tok",
  comment: "tok",
  scriptPath: "/spool/w1/a1/job.sh",
  workDir: "/spool/w1/workspace",
  stdoutPath: "/spool/w1/a1/stdout",
  stderrPath: "/spool/w1/a1/stderr",
  partition: null,
  qos: null,
  account: null,
  nodes: 1,
  cpusPerTask: 1,
  gpusPerNode: 0,
  memoryMb: null,
  timeLimitMinutes: null,
  env: {},
};

describe("sbatch for the owner", () => {
  test("--uid and --gid of the account; none without one", () => {
    const as = sbatchArgv({ ...SPEC, submitAs: { uid: 71001, gid: 72000 } });
    if (as.kind !== "Valid") throw new Error(as.message);
    expect(as.argv).toContain("--uid=71001");
    expect(as.argv).toContain("--gid=72000");
    const plain = sbatchArgv(SPEC);
    if (plain.kind !== "Valid") throw new Error(plain.message);
    expect(plain.argv.some((a) => a.startsWith("--uid") || a.startsWith("--gid"))).toBe(false);
  });

  test("a step in an owner's job is started as the owner too", () => {
    const step = {
      jobId: "42",
      command: ["id"],
      env: {},
      workDir: null,
      timeoutMs: 1000,
      maxOutputBytes: 1000,
      timeLimitMinutes: 1,
    };
    const as = srunArgv({ ...step, submitAs: { uid: 71001, gid: 71001 } });
    if (as.kind !== "Valid") throw new Error(as.message);
    expect(as.argv.slice(0, 3)).toEqual(["--jobid=42", "--uid=71001", "--gid=71001"]);
    expect(srunArgv({ ...step, submitAs: { uid: 0, gid: 0 } }).kind).toBe("Invalid");
    const plain = srunArgv(step);
    expect(plain.kind === "Valid" && plain.argv.some((a) => a.startsWith("--uid"))).toBe(false);
  });

  test("never root's uid or group", () => {
    expect(sbatchArgv({ ...SPEC, submitAs: { uid: 0, gid: 71001 } }).kind).toBe("Invalid");
    expect(sbatchArgv({ ...SPEC, submitAs: { uid: 71001, gid: 0 } }).kind).toBe("Invalid");
  });
});
