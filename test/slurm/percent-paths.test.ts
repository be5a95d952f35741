/**
 * sbatch expands `%j`, `%u`, `%x`... in the paths it is given (and `\` switches that off), so a
 * workspace or spool path with `%` in it would send the job's output or working directory
 * somewhere the daemon never chose. Every path handed to sbatch or srun is refused, naming
 * the field, never passed through.
 */
import { describe, expect, test } from "bun:test";
import {
  type BatchSpec,
  sbatchArgv,
  srunArgv,
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

const PATH_FIELDS = [
  ["scriptPath", "script"],
  ["workDir", "working directory"],
  ["stdoutPath", "stdout log"],
  ["stderrPath", "stderr log"],
] as const;

describe("% in a path handed to the scheduler", () => {
  test("the base request is valid", () => {
    expect(sbatchArgv(SPEC).kind).toBe("Valid");
  });

  for (const [field, named] of PATH_FIELDS) {
    for (const bad of ["/spool/%j/x", "/spool/w1%u", "/spool/a\\%j"]) {
      test(`sbatch refuses ${field} = ${bad}, naming the ${named}`, () => {
        const result = sbatchArgv({ ...SPEC, [field]: bad });
        expect(result.kind).toBe("Invalid");
        if (result.kind === "Invalid") expect(result.message).toContain(named);
      });
    }
  }

  test("srun refuses a working directory with %", () => {
    const step = {
      jobId: "42",
      command: ["true"],
      env: {},
      timeoutMs: 1000,
      maxOutputBytes: 1000,
      timeLimitMinutes: 1,
    };
    expect(srunArgv({ ...step, workDir: "/spool/w1/workspace" }).kind).toBe("Valid");
    const result = srunArgv({ ...step, workDir: "/spool/%j" });
    expect(result.kind).toBe("Invalid");
    if (result.kind === "Invalid") expect(result.message).toContain("working directory");
  });
});
