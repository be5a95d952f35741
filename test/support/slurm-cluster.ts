/**
 * Gate for the real-cluster tests (test/slurm/*.cluster.test.ts): they run when
 * OPENAI4S_SLURM_TEST_DIR names a cluster started by scripts/slurm-test-cluster.sh, and are
 * skipped otherwise with one line saying how to enable them.
 */
import { join } from "node:path";
import {
  createSlurmBackend,
  type PlacementCatalog,
  type SlurmBackend,
} from "../../src/adapters/backend-slurm/backend.ts";
import type { SlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import type {
  AllocationBackend,
  AllocationObservation,
  ObservationTarget,
  SubmitResult,
} from "../../src/core/ports/allocation-backend.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import type { ProgramRunner } from "../../src/lib/process-runner.ts";
import { createProgramRunner } from "../../src/lib/process-runner.ts";
import { eventually } from "./eventually.ts";
import { loadTestCluster, type TestCluster } from "./slurm-cluster-config.ts";

export type { TestCluster } from "./slurm-cluster-config.ts";

export const ENABLE_HINT =
  "slurm-cluster tests skipped: set OPENAI4S_SLURM_TEST_DIR to enable them, e.g. " +
  "`bash scripts/slurm-test-cluster.sh up /tmp/o4s-slurm && OPENAI4S_SLURM_TEST_DIR=/tmp/o4s-slurm bun test`";

export const testCluster: TestCluster | null = loadTestCluster(process.env);
// Module code runs once per test process, so the hint is printed once, not once per file.
if (testCluster === null) console.log(ENABLE_HINT);

export function realBroker(
  cluster: TestCluster,
  options: { readonly runner?: ProgramRunner; readonly commandTimeoutMs?: number } = {},
): SlurmBroker {
  return createSlurmBroker({
    path: cluster.path,
    slurmConf: cluster.slurmConf,
    runner: options.runner ?? createProgramRunner(),
    ...(options.commandTimeoutMs === undefined
      ? {}
      : { commandTimeoutMs: options.commandTimeoutMs }),
  });
}

/**
 * The one fault a real cluster cannot produce on demand: sbatch reaches the controller and
 * the job is created, but the caller never hears the answer. The real command runs; its
 * reply is thrown away and reported as a timeout.
 */
export function answerLosingRunner(): ProgramRunner {
  const real = createProgramRunner();
  return {
    async run(request) {
      const outcome = await real.run(request);
      if (request.program !== "sbatch") return outcome;
      return { kind: "TimedOut", stdout: "", stderr: "", durationMs: request.timeoutMs };
    },
  };
}

/**
 * A broker that sees the controller as having already forgotten every job (what MinJobAge
 * does five minutes after a job ends): squeue answers, with nothing. Accounting is real.
 * Used to make the accounting half of a lookup answer on its own, without a 5-minute wait.
 */
export function forgetfulController(broker: SlurmBroker): SlurmBroker {
  return {
    ...broker,
    async listQueue(names) {
      const answer = await broker.listQueue(names);
      return answer.kind === "Answered" ? { kind: "Answered", value: [] } : answer;
    },
  };
}

/** Runs a scheduler command as the cluster's admin; stdout and stderr, joined. */
export function adminCommand(cluster: TestCluster, ...args: string[]): string {
  const out = Bun.spawnSync({
    cmd: args,
    env: { PATH: cluster.path, SLURM_CONF: cluster.slurmConf },
    stdout: "pipe",
    stderr: "pipe",
  });
  return `${out.stdout.toString()}${out.stderr.toString()}`;
}

/**
 * An administrator's urgent job that needs every node (the test cluster's `urgent` partition
 * preempts with REQUEUE): whatever of ours runs is preempted. Returns the job id.
 */
export function preemptEveryNode(cluster: TestCluster): string {
  return adminCommand(
    cluster,
    "sbatch",
    "--parsable",
    "--partition=urgent",
    "--nodes=2",
    "--exclusive",
    "--output=/dev/null",
    "--wrap=sleep 3",
  ).trim();
}

/** Runs scripts/slurm-test-cluster.sh COMMAND DIR ARGS... and fails loudly if it fails. */
export function clusterScript(cluster: TestCluster, command: string, ...args: string[]): string {
  const result = Bun.spawnSync({
    cmd: [
      "bash",
      join(import.meta.dir, "../../scripts/slurm-test-cluster.sh"),
      command,
      cluster.dir,
      ...args,
    ],
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = `${result.stdout.toString()}${result.stderr.toString()}`;
  if (result.exitCode !== 0) throw new Error(`slurm-test-cluster.sh ${command} failed:\n${out}`);
  return out;
}

/** Observes until `done` accepts the observation, or throws with the last one at the deadline. */
export async function waitForObservation(
  backend: AllocationBackend,
  target: ObservationTarget,
  done: (o: AllocationObservation) => boolean,
  deadlineMs: number,
): Promise<AllocationObservation> {
  const matching = async () => {
    const result = await backend.observe([target]);
    if (result.kind !== "Observed") throw new Error(`not observed: ${JSON.stringify(result)}`);
    const o = result.observations.get(target.allocationId);
    if (o === undefined || !done(o)) throw new Error(`observed: ${JSON.stringify(o)}`);
    return o;
  };
  // 250 ms: each look is a squeue/sacct call on the shared test cluster.
  return await eventually(matching, {
    what: "a matching observation",
    timeoutMs: deadlineMs,
    intervalMs: 250,
  });
}

export const inPhase =
  (...phases: string[]) =>
  (o: AllocationObservation) =>
    o.kind === "Observed" && phases.includes(o.phase);

/** The Slurm backend over `broker` and these placements, on the system clock, logging nothing. */
export function clusterBackend(broker: SlurmBroker, placements: PlacementCatalog): SlurmBackend {
  return createSlurmBackend({ broker, placements, clock: systemClock, log: silentLog });
}

/** The job a submission created or found again; throws naming what came back instead. */
export function handleOf(result: SubmitResult | undefined): string {
  if (result?.kind !== "Created" && result?.kind !== "Existing") {
    throw new Error(`expected a job, got ${JSON.stringify(result)}`);
  }
  return result.handle;
}
