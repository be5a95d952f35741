/**
 * The Slurm backend against a REAL cluster (scripts/slurm-test-cluster.sh). Nothing here
 * mutates the cluster's configuration; the outage and accounting-flag tests live in
 * outage.cluster.test.ts.
 *
 * The one ~70 s time-limit job is submitted first, in beforeAll, and checked last, so the
 * other tests run while the scheduler's 30-second enforcement loop catches up with it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { SlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import type { SlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import type { ObservationTarget } from "../../src/core/ports/allocation-backend.ts";
import { hintFor } from "../../src/core/reason-hints.ts";
import { eventually } from "../support/eventually.ts";
import {
  answerLosingRunner,
  clusterBackend,
  forgetfulController,
  handleOf,
  inPhase,
  realBroker,
  type TestCluster,
  testCluster,
  waitForObservation,
} from "../support/slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, request, target } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const PLACEMENTS = catalog({
  cpu: BASE_PLACEMENT,
  gpu: { ...BASE_PLACEMENT, gpus: 1 },
  pair: { ...BASE_PLACEMENT, nodes: 2 },
  short: { ...BASE_PLACEMENT, timeLimitSeconds: 60 },
});

describe.skipIf(testCluster === null)("slurm-cluster backend", () => {
  const cluster = testCluster as TestCluster;
  let dir: string;
  let broker: SlurmBroker;
  let backend: SlurmBackend;
  let timeLimited: ObservationTarget;

  beforeAll(async () => {
    dir = makeTempDir("o4s-slurm-cluster-");
    broker = realBroker(cluster);
    backend = clusterBackend(broker, PLACEMENTS);
    const req = request(dir, command(["/bin/sleep", "600"]), { profile: "short" });
    timeLimited = target(req, handleOf((await backend.submit([req])).get(req.token)));
  });

  afterAll(async () => {
    // Leave nothing running on the shared cluster.
    await backend.cancel([timeLimited]);
    removeDir(dir);
  });

  test("submit, observe, complete: the job sees only the environment we gave it", async () => {
    process.env["O4S_DAEMON_CANARY"] = "must-not-reach-the-job";
    const value = "a b $x ;%\\ é = c";
    const req = request(
      dir,
      command(
        [
          "/bin/sh",
          "-c",
          'printf "%s" "$MODE" > mode.txt; env > env.txt; echo done',
          "\n#SBATCH --comment=evil\n",
        ],
        { MODE: value },
      ),
      { profile: "gpu" },
    );
    const result = (await backend.submit([req])).get(req.token);
    expect(result?.kind).toBe("Created");
    const t = target(req, handleOf(result));
    const end = await waitForObservation(
      backend,
      t,
      inPhase("COMPLETED", "FAILED", "CANCELLED", "LOST"),
      60_000,
    );
    expect(end).toMatchObject({
      kind: "Observed",
      phase: "COMPLETED",
      reason: "EXITED_ZERO",
      exitCode: 0,
    });
    expect(readFileSync(join(req.workspaceDir, "mode.txt"), "utf8")).toBe(value);
    const env = readFileSync(join(req.workspaceDir, "env.txt"), "utf8");
    expect(env).not.toContain("O4S_DAEMON_CANARY");
    expect(env).toContain("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
    expect(readFileSync(join(req.allocationDir, "stdout.log"), "utf8")).toBe("done\n");
    // The argument that looked like a directive stayed an argument.
    const queue = await broker.listQueue([req.token]);
    expect(queue).toMatchObject({
      kind: "Answered",
      value: [{ jobId: t.handle, comment: req.token }],
    });
    delete process.env["O4S_DAEMON_CANARY"];
  }, 90_000);

  test("a nonzero exit is FAILED/NONZERO_EXIT with its code", async () => {
    const req = request(dir, command(["/bin/sh", "-c", "exit 3"]));
    const t = target(req, handleOf((await backend.submit([req])).get(req.token)));
    const end = await waitForObservation(
      backend,
      t,
      inPhase("COMPLETED", "FAILED", "CANCELLED"),
      60_000,
    );
    expect(end).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 });
  }, 90_000);

  test("cancel ends a running job as CANCELLED", async () => {
    const req = request(dir, command(["/bin/sleep", "300"]));
    const t = target(req, handleOf((await backend.submit([req])).get(req.token)));
    await waitForObservation(backend, t, inPhase("RUNNING"), 30_000);
    expect((await backend.cancel([t])).get(req.allocationId)).toEqual({ kind: "Requested" });
    const end = await waitForObservation(
      backend,
      t,
      inPhase("CANCELLED", "FAILED", "COMPLETED"),
      60_000,
    );
    expect(end).toMatchObject({ phase: "CANCELLED" });
    // Cancelling again is still an answer, not an error.
    expect((await backend.cancel([t])).get(req.allocationId)).toEqual({ kind: "Requested" });
  }, 90_000);

  test("a lost sbatch answer: Unknown, then findByToken resolves it to the one job in accounting", async () => {
    const losing = clusterBackend(
      realBroker(cluster, { runner: answerLosingRunner() }),
      PLACEMENTS,
    );
    const req = request(dir, command(["/bin/true"]));
    const first = (await losing.submit([req])).get(req.token);
    expect(first?.kind).toBe("Unknown");

    const found = (await backend.findByToken([req.token])).get(req.token);
    expect(found?.kind).toBe("Found");
    if (found?.kind !== "Found") return;
    const jobId = String(found.handle);

    // Accounting lags the controller by seconds: wait for the job's final row there.
    const settled = async () => {
      const answer = await broker.listAccounting({
        kind: "ByNames",
        names: [req.token],
        lookbackSeconds: 3600,
      });
      const rows = answer.kind === "Answered" ? answer.value : [];
      // The comment is written separately from the end state (seen on a fresh cluster: a
      // COMPLETED row with an empty comment for a moment), so wait for both.
      if (rows.length > 0 && rows.every((r) => r.state === "COMPLETED" && r.comment !== "")) {
        return rows;
      }
      throw new Error(`accounting not settled: ${JSON.stringify(rows)}`);
    };
    const rows = await eventually(settled, { timeoutMs: 60_000, intervalMs: 500 });
    expect(rows.map((r) => r.jobId)).toEqual([jobId]);
    expect(rows[0]?.comment).toBe(req.token); // this cluster stores comments (job_comment on)

    // The accounting half of the lookup on its own (the controller "forgot" the job).
    const viaAccounting = clusterBackend(forgetfulController(broker), PLACEMENTS);
    const again = (await viaAccounting.findByToken([req.token])).get(req.token);
    expect(again).toMatchObject({
      kind: "Found",
      handle: jobId,
      observation: { phase: "COMPLETED" },
    });

    // The retry returns the job instead of submitting a second one.
    expect((await backend.submit([req])).get(req.token)).toMatchObject({
      kind: "Existing",
      handle: jobId,
    });
    const after = await broker.listAccounting({
      kind: "ByNames",
      names: [req.token],
      lookbackSeconds: 3600,
    });
    expect(after.kind === "Answered" ? after.value.map((r) => r.jobId) : after).toEqual([jobId]);
  }, 120_000);

  test("a 2-node session launch: one worker per node, ranks 0 and 1 from SLURM_PROCID", async () => {
    const req = request(
      dir,
      {
        kind: "WORKER",
        workerCommand: [
          "/bin/sh",
          "-c",
          'rank=$(printenv "$2"); printf "%s %s\\n" "$1" "$(hostname)" > "$0/rank-$rank"',
          dir,
        ],
        credentialDir: join(dir, "credentials"),
        ranks: 2,
        env: {},
      },
      { profile: "pair" },
    );
    const t = target(req, handleOf((await backend.submit([req])).get(req.token)));
    const end = await waitForObservation(
      backend,
      t,
      inPhase("COMPLETED", "FAILED", "CANCELLED"),
      60_000,
    );
    expect(end).toMatchObject({ phase: "COMPLETED" });
    const rank0 = readFileSync(join(dir, "rank-0"), "utf8").trim().split(" ");
    const rank1 = readFileSync(join(dir, "rank-1"), "utf8").trim().split(" ");
    expect(existsSync(join(dir, "rank-2"))).toBe(false);
    // The worker saw `--rank-env SLURM_PROCID` appended, and ran once on each node.
    expect([rank0[0], rank1[0]]).toEqual(["--rank-env", "--rank-env"]);
    expect(new Set([rank0[1], rank1[1]]).size).toBe(2);
  }, 90_000);

  test("runTask runs a step in the live allocation, and refuses once it is gone (INV-4)", async () => {
    const req = request(dir, command(["/bin/sleep", "300"]));
    const t = target(req, handleOf((await backend.submit([req])).get(req.token)));
    const running = await waitForObservation(backend, t, inPhase("RUNNING"), 30_000);
    const deadlineAt = running.kind === "Observed" ? running.deadlineAt : undefined;
    if (deadlineAt === undefined || deadlineAt === null) throw new Error("no deadline observed");
    const calls = () => ({ ...broker.callCounts() });
    const before = calls();
    const result = await backend.capabilities.tasks.runTask(
      t,
      [
        "/bin/sh",
        "-c",
        `echo hi; pwd; echo "d=\${OPENAI4S_DEADLINE-unset}"; echo oops >&2; exit 5`,
      ],
      {
        timeoutMs: 30_000,
      },
    );
    // The step sees the same deadline as its job (the scheduler's end time for it).
    expect(result).toMatchObject({
      kind: "Completed",
      exitCode: 5,
      stdout: `hi\n${req.workspaceDir}\nd=${Math.floor(deadlineAt / 1000)}\n`,
    });
    if (result.kind === "Completed") expect(result.stderr).toContain("oops");
    expect(calls().sbatch).toBe(before.sbatch);

    await backend.cancel([t]);
    await waitForObservation(backend, t, inPhase("CANCELLED", "FAILED", "COMPLETED"), 60_000);
    const srunBefore = calls().srun;
    const refused = await backend.capabilities.tasks.runTask(t, ["/bin/true"], {
      timeoutMs: 10_000,
    });
    expect(refused.kind).toBe("Refused");
    expect(calls().sbatch).toBe(before.sbatch);
    expect(calls().srun).toBe(srunBefore);
  }, 120_000);

  test("a credential-shaped variable is refused before anything reaches the scheduler", async () => {
    const before = broker.callCounts().sbatch;
    const req = request(dir, command(["/bin/true"], { HF_TOKEN: "hf_secret" }));
    expect((await backend.submit([req])).get(req.token)?.kind).toBe("Rejected");
    expect(broker.callCounts().sbatch).toBe(before);
  }, 30_000);

  test("the time limit ends the job as FAILED/TIME_LIMIT_EXCEEDED (the one ~70 s test)", async () => {
    const end = await waitForObservation(
      backend,
      timeLimited,
      inPhase("COMPLETED", "FAILED", "CANCELLED", "LOST"),
      150_000,
    );
    expect(end).toMatchObject({ phase: "FAILED", reason: "TIME_LIMIT_EXCEEDED" });
    if (end.kind !== "Observed") throw new Error("unreachable");
    // The person-facing hint (what a workload view shows) carries accounting's figures.
    expect(hintFor(end.reason, end.message)).toMatch(
      /^ran [0-9]+:[0-9]{2}:[0-9]{2} of 0:01:00: raise timeLimitSeconds$/,
    );
  }, 180_000);
});
