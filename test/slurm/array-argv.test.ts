/** A job array is one sbatch: `--array=0-(N-1)%M`, with one log per element. */
import { describe, expect, test } from "bun:test";
import {
  type BatchSpec,
  sbatchArgv,
  squeueArgv,
} from "../../src/adapters/backend-slurm/broker-argv.ts";

const SPEC: BatchSpec = {
  jobName: "o4s-abc",
  comment: "o4s-token",
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

function argv(spec: BatchSpec): readonly string[] {
  const result = sbatchArgv(spec);
  if (result.kind !== "Valid") throw new Error(result.message);
  return result.argv;
}

describe("sbatch for a job array", () => {
  test("a single job has no array option and its logs as given", () => {
    const plain = argv(SPEC);
    expect(plain.some((a) => a.startsWith("--array"))).toBe(false);
    expect(plain).toContain("--output=/spool/w1/a1/stdout");
    expect(argv({ ...SPEC, array: null })).toEqual(plain);
  });

  test("N elements, at most M at once, one log per element", () => {
    const a = argv({ ...SPEC, array: { size: 1000, maxConcurrent: 50 } });
    expect(a).toContain("--array=0-999%50");
    expect(a).toContain("--output=/spool/w1/a1/stdout.%a");
    expect(a).toContain("--error=/spool/w1/a1/stderr.%a");
    expect(argv({ ...SPEC, array: { size: 3, maxConcurrent: null } })).toContain("--array=0-2");
  });

  test("a size or cap out of range is refused, naming it", () => {
    for (const array of [
      { size: 0, maxConcurrent: null },
      { size: 1.5, maxConcurrent: null },
      { size: 4_000_002, maxConcurrent: null },
      { size: 10, maxConcurrent: 0 },
      { size: 10, maxConcurrent: 11 },
    ]) {
      const result = sbatchArgv({ ...SPEC, array });
      expect(result.kind).toBe("Invalid");
      if (result.kind === "Invalid") expect(result.message).toContain("array");
    }
  });
});

test("squeue is asked for JobArrayID, so an element's row names its array, not its raw id", () => {
  const result = squeueArgv({ uid: 0, names: ["o4s-abc"] });
  if (result.kind !== "Valid") throw new Error(result.message);
  expect(result.argv.find((a) => a.startsWith("--Format="))).toStartWith("--Format=JobArrayID:0|");
});
