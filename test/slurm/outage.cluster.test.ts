/**
 * The tests that change the REAL cluster: slurmctld stopped under active jobs, and slurmctld
 * restarted without AccountingStoreFlags=job_comment. They are in one file so they run one
 * after the other, and each restores the cluster in a `finally` whatever happens.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { SlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import type { SlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import type { Phase } from "../../src/core/models.ts";
import type { ObservationTarget, ObserveResult } from "../../src/core/ports/allocation-backend.ts";
import { eventually } from "../support/eventually.ts";
import {
  answerLosingRunner,
  clusterBackend,
  clusterScript,
  forgetfulController,
  inPhase,
  realBroker,
  type TestCluster,
  testCluster,
  waitForObservation,
} from "../support/slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, request, target } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const PLACEMENTS = catalog({ cpu: BASE_PLACEMENT });

/** What a reconciler does with an observation: only an Observed phase moves anything. */
function apply(phases: Map<string, Phase>, result: ObserveResult): void {
  if (result.kind !== "Observed") return;
  for (const [id, o] of result.observations) if (o.kind === "Observed") phases.set(id, o.phase);
}

describe.skipIf(testCluster === null)("slurm-cluster outage and accounting flags", () => {
  const cluster = testCluster as TestCluster;
  let dir: string;
  let broker: SlurmBroker;
  let backend: SlurmBackend;

  beforeAll(() => {
    dir = makeTempDir("o4s-slurm-outage-");
    broker = realBroker(cluster);
    backend = clusterBackend(broker, PLACEMENTS);
  });

  afterAll(() => removeDir(dir));

  test("slurmctld stopped for several ticks: no phase changes, then convergence after restart", async () => {
    const reqs = Array.from({ length: 3 }, () => request(dir, command(["/bin/sleep", "300"])));
    const submitted = await backend.submit(reqs);
    const targets: ObservationTarget[] = reqs.map((r) => {
      const s = submitted.get(r.token);
      if (s?.kind !== "Created") throw new Error(`submit: ${JSON.stringify(s)}`);
      return target(r, s.handle);
    });
    for (const t of targets) await waitForObservation(backend, t, inPhase("RUNNING"), 30_000);
    const phases = new Map<string, Phase>();
    apply(phases, await backend.observe(targets));
    expect([...phases.values()]).toEqual(["RUNNING", "RUNNING", "RUNNING"]);
    const before = new Map(phases);

    clusterScript(cluster, "stop-ctld");
    try {
      for (let tick = 0; tick < 3; tick++) {
        const started = Date.now();
        const result = await backend.observe(targets);
        expect(result.kind).toBe("Unavailable");
        if (result.kind === "Unavailable") expect(result.message).toContain("unreachable");
        apply(phases, result);
        expect(phases).toEqual(before);
        console.log(`outage tick ${tick}: ${result.kind} after ${Date.now() - started} ms`);
      }
      // Every other operation says "no answer" too, and none of them reads it as absence.
      const extra = request(dir, command(["/bin/true"]));
      const [submit, find, cancel] = await Promise.all([
        backend.submit([extra]),
        backend.findByToken([extra.token]),
        backend.cancel(targets.slice(0, 1)),
      ]);
      expect(submit.get(extra.token)?.kind).toBe("Unknown");
      expect(find.get(extra.token)?.kind).toBe("Unavailable");
      expect(cancel.get(targets[0]?.allocationId ?? "")?.kind).toBe("Unavailable");
      expect((await backend.diagnostics()).healthy).toBe(false);
    } finally {
      clusterScript(cluster, "start-ctld");
    }

    apply(phases, await backend.observe(targets));
    expect(phases).toEqual(before);
    expect((await backend.diagnostics()).healthy).toBe(true);
    await backend.cancel(targets);
    for (const t of targets) {
      expect(
        await waitForObservation(backend, t, inPhase("CANCELLED", "FAILED", "COMPLETED"), 60_000),
      ).toMatchObject({
        phase: "CANCELLED",
      });
    }
  }, 180_000);

  test("with job_comment off, a lost submission is still found in accounting by JobName", async () => {
    clusterScript(cluster, "restart-ctld", "--job-comment=off");
    try {
      const losing = clusterBackend(
        realBroker(cluster, { runner: answerLosingRunner() }),
        PLACEMENTS,
      );
      const req = request(dir, command(["/bin/true"]));
      expect((await losing.submit([req])).get(req.token)?.kind).toBe("Unknown");

      const settled = async () => {
        const answer = await broker.listAccounting({
          kind: "ByNames",
          names: [req.token],
          lookbackSeconds: 3600,
        });
        const rows = answer.kind === "Answered" ? answer.value : [];
        if (rows.length > 0 && rows.every((r) => r.state === "COMPLETED")) return rows;
        throw new Error(`accounting not settled: ${JSON.stringify(rows)}`);
      };
      const rows = await eventually(settled, { timeoutMs: 60_000, intervalMs: 500 });
      expect(rows.length).toBe(1);
      // The proof that this is the JobName path: accounting kept no comment.
      expect(rows[0]?.comment).toBe("");
      const jobId = rows[0]?.jobId;

      const viaAccounting = clusterBackend(forgetfulController(broker), PLACEMENTS);
      expect((await viaAccounting.findByToken([req.token])).get(req.token)).toMatchObject({
        kind: "Found",
        handle: jobId,
      });
      expect((await viaAccounting.submit([req])).get(req.token)).toMatchObject({
        kind: "Existing",
        handle: jobId,
      });
      const after = await broker.listAccounting({
        kind: "ByNames",
        names: [req.token],
        lookbackSeconds: 3600,
      });
      expect(after.kind === "Answered" ? after.value.length : after).toBe(1);
    } finally {
      clusterScript(cluster, "restart-ctld", "--job-comment=on");
    }
  }, 180_000);
});
