/**
 * A profile's placement as the broker's own sbatch argv: what check-config shows and
 * preflight tests, built by the broker's builder rather than a second rendering of it.
 */
import type { SlurmPlacement } from "./backend-options.ts";
import { type BatchSpec, sbatchArgv } from "./broker-argv.ts";

/** The placement as the broker will submit it, with bookkeeping values that always pass. */
function probeSpec(placement: SlurmPlacement): BatchSpec {
  return {
    jobName: "o4s-preflight",
    comment: "o4s-preflight",
    scriptPath: "/dev/null",
    workDir: "/",
    stdoutPath: "/dev/null",
    stderrPath: "/dev/null",
    partition: placement.partition,
    qos: placement.qos,
    account: placement.account,
    nodes: placement.nodes,
    cpusPerTask: placement.cpus,
    gpusPerNode: placement.gpus,
    memoryMb: placement.memoryMb,
    timeLimitMinutes:
      placement.timeLimitSeconds === null
        ? null
        : Math.max(1, Math.ceil(placement.timeLimitSeconds / 60)),
    env: {},
  };
}

/** Options that say nothing about where or on what a job runs. */
const BOOKKEEPING_OPTIONS = [
  "--parsable",
  "--job-name=",
  "--comment=",
  "--chdir=",
  "--output=",
  "--error=",
  "--export=",
  "--no-requeue",
];

export type ArgvBuild =
  | { readonly kind: "Valid"; readonly argv: readonly string[] }
  | { readonly kind: "Invalid"; readonly message: string };

/**
 * The sbatch argv (without the script) a job on this placement is submitted with: built by
 * the broker itself, so check-config shows and preflight tests the real request rather than
 * a second rendering of it.
 */
export function probeArgv(placement: SlurmPlacement): ArgvBuild {
  const spec = probeSpec(placement);
  const built = sbatchArgv(spec);
  if (built.kind === "Invalid") return built;
  const argv = built.argv;
  if (argv[argv.length - 1] !== spec.scriptPath) {
    throw new Error("sbatchArgv no longer ends with the script path: update probeArgv");
  }
  return { kind: "Valid", argv: argv.slice(0, -1) };
}

/** probeArgv minus bookkeeping: only what says where and on what the job runs. */
export function resourceOptions(placement: SlurmPlacement): ArgvBuild {
  const built = probeArgv(placement);
  if (built.kind === "Invalid") return built;
  const bookkeeping = (arg: string) =>
    BOOKKEEPING_OPTIONS.some((b) => arg === b || (b.endsWith("=") && arg.startsWith(b)));
  return { kind: "Valid", argv: built.argv.filter((arg) => !bookkeeping(arg)) };
}
