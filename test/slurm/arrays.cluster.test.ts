/**
 * Job arrays on the REAL cluster (scripts/slurm-test-cluster.sh), through the Slurm backend:
 * one sbatch for the whole array, one squeue per observation whatever its size, every
 * element's state read from it, a failure named by index, a lost sbatch answer still one
 * array (INV-8), and cancel ending every element.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import type { SlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import type { SlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import { allocationLogPath } from "../../src/core/layout.ts";
import type {
  AllocationObservation,
  ObservationTarget,
  SubmitResult,
} from "../../src/core/ports/allocation-backend.ts";
import {
  answerLosingRunner,
  clusterBackend,
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

/** A broker that counts the scheduler commands it runs, by command. */
function counting(broker: SlurmBroker) {
  const calls = { sbatch: 0, squeue: 0, sacct: 0, scancel: 0 };
  const counted: SlurmBroker = {
    ...broker,
    submitBatch: async (spec) => {
      calls.sbatch += 1;
      return broker.submitBatch(spec);
    },
    listQueue: async (names) => {
      calls.squeue += 1;
      return broker.listQueue(names);
    },
    listAccounting: async (query) => {
      calls.sacct += 1;
      return broker.listAccounting(query);
    },
    cancelJobs: async (ids) => {
      calls.scancel += 1;
      return broker.cancelJobs(ids);
    },
  };
  return { broker: counted, calls };
}

function arrayTarget(
  req: Parameters<typeof target>[0],
  result: SubmitResult | undefined,
): ObservationTarget {
  if (result?.kind !== "Created" && result?.kind !== "Existing") {
    throw new Error(`expected an array, got ${JSON.stringify(result)}`);
  }
  return { ...target(req, result.handle), arraySize: req.array?.size ?? 0 };
}

const ELEMENT_SCRIPT =
  'echo "element $OPENAI4S_ARRAY_INDEX of task $SLURM_ARRAY_TASK_ID"; [ "$OPENAI4S_ARRAY_INDEX" != "$FAIL_AT" ] || exit 3';

describe.skipIf(testCluster === null)("slurm-cluster job arrays", () => {
  const cluster = testCluster as TestCluster;
  let dir: string;
  const live: ObservationTarget[] = [];
  let backend: SlurmBackend;

  beforeAll(() => {
    dir = makeTempDir("o4s-slurm-arrays-");
    backend = clusterBackend(realBroker(cluster), PLACEMENTS);
  });

  afterAll(async () => {
    // Leave nothing running on the shared cluster.
    await backend.cancel(live);
    removeDir(dir);
  });

  test("1,000 elements: one sbatch, one squeue per observation, all COMPLETED", async () => {
    const { broker, calls } = counting(realBroker(cluster));
    const counted = clusterBackend(broker, PLACEMENTS);
    const req = request(
      dir,
      command(["/bin/sh", "-c", ELEMENT_SCRIPT], { FAIL_AT: "no-element" }),
      {
        array: { size: 1000, maxConcurrent: null },
        freshToken: true,
      },
    );
    const t = arrayTarget(req, (await counted.submit([req])).get(req.token));
    live.push(t);
    expect(calls.sbatch).toBe(1);
    let observations = 0;
    const squeueBefore = calls.squeue;
    const observed = await waitForObservation(
      {
        ...counted,
        observe: async (targets) => {
          observations += 1;
          return counted.observe(targets);
        },
      },
      t,
      inPhase("COMPLETED", "FAILED", "CANCELLED", "LOST"),
      600_000,
    );
    expect(observed).toMatchObject({ phase: "COMPLETED", reason: "EXITED_ZERO", exitCode: 0 });
    const array = (observed as Extract<AllocationObservation, { kind: "Observed" }>).array;
    expect(array?.counts).toEqual({ COMPLETED: 1000 });
    expect(array?.indices).toEqual({ COMPLETED: "0-999" });
    expect(calls.squeue - squeueBefore).toBe(observations);
    expect(calls.sbatch).toBe(1);
    // One log per element, each told its own index.
    expect(readFileSync(`${allocationLogPath(req.allocationDir, "stdout")}.417`, "utf8")).toBe(
      "element 417 of task 417\n",
    );
    console.log(
      `1000-element array: ${observations} observations, ${calls.squeue} squeue, ${calls.sacct} sacct, ${calls.sbatch} sbatch`,
    );
  }, 660_000);

  test("one failed element makes the array FAILED, named by its index and exit code", async () => {
    const req = request(dir, command(["/bin/sh", "-c", ELEMENT_SCRIPT], { FAIL_AT: "3" }), {
      array: { size: 6, maxConcurrent: 2 },
    });
    const t = arrayTarget(req, (await backend.submit([req])).get(req.token));
    live.push(t);
    const observed = await waitForObservation(
      backend,
      t,
      inPhase("COMPLETED", "FAILED", "CANCELLED", "LOST"),
      300_000,
    );
    expect(observed).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 });
    if (observed.kind !== "Observed") return;
    expect(observed.message).toContain("1 of 6 elements failed (index 3)");
    expect(observed.array?.elements).toEqual([
      { index: 3, phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 },
    ]);
    expect(existsSync(`${allocationLogPath(req.allocationDir, "stdout")}.5`)).toBe(true);

    // Once the controller has forgotten the elements (MinJobAge), accounting alone says the
    // same: every element read from sacct, the failure still named by its index.
    const viaAccounting = clusterBackend(forgetfulController(realBroker(cluster)), PLACEMENTS);
    const again = await waitForObservation(viaAccounting, t, inPhase("FAILED"), 60_000);
    if (again.kind !== "Observed") return;
    expect(again.message).toContain("1 of 6 elements failed (index 3)");
    expect(again.array?.counts).toEqual({ COMPLETED: 5, FAILED: 1 });
  }, 330_000);

  test("a lost sbatch answer still leaves exactly one array, found by its token (INV-8)", async () => {
    const losing = clusterBackend(
      realBroker(cluster, { runner: answerLosingRunner() }),
      PLACEMENTS,
    );
    const req = request(dir, command(["/bin/sleep", "600"]), {
      array: { size: 4, maxConcurrent: 1 },
    });
    const first = (await losing.submit([req])).get(req.token);
    expect(first?.kind).toBe("Unknown");
    const found = (await backend.findByToken([req.token])).get(req.token);
    expect(found?.kind).toBe("Found");
    if (found?.kind !== "Found") return;
    const t = { ...target(req, found.handle), arraySize: 4 };
    live.push(t);
    // Found an array, not one of its elements' phases: the next observation reads them all.
    expect(found.observation.kind).toBe("Indeterminate");
    // The retry returns the array instead of submitting a second one.
    expect((await backend.submit([req])).get(req.token)).toMatchObject({
      kind: "Existing",
      handle: found.handle,
    });
    const rows = await realBroker(cluster).listQueue([req.token]);
    if (rows.kind !== "Answered") throw new Error(JSON.stringify(rows));
    expect(new Set(rows.value.map((r) => r.jobId))).toEqual(new Set([String(found.handle)]));

    // Cancel ends every element, the waiting ones with it.
    await waitForObservation(backend, t, inPhase("RUNNING"), 120_000);
    expect((await backend.cancel([t])).get(t.allocationId)).toEqual({ kind: "Requested" });
    const ended = await waitForObservation(backend, t, inPhase("CANCELLED"), 120_000);
    if (ended.kind === "Observed") expect(ended.array?.counts).toEqual({ CANCELLED: 4 });
  }, 300_000);
});
