/**
 * Job arrays through the daemon (composition root, reconciler, API, sandboxed launch) on the
 * REAL cluster: one POST, each element told its index inside the sandbox, the array's phase
 * by the documented rules with the failed index named, and cancel ending every element.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { clusterDaemonForBlock, waitForPhase } from "../support/cluster-daemon.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";

describe.skipIf(testCluster === null)("slurm-cluster daemon: job arrays", () => {
  const cluster = testCluster as TestCluster;
  const harness = clusterDaemonForBlock(cluster, "o4s-slurm-arrays-daemon-");
  const { api } = harness;
  const waitFor = (id: string, phases: readonly string[], deadlineMs: number) =>
    waitForPhase(api, id, phases, deadlineMs);

  test("one failed element: FAILED, naming its index; each element logs its own index", async () => {
    const created = await api("POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "small",
      array: 6,
      maxConcurrent: 3,
      env: { FAIL_AT: "3" },
      command: [
        "/bin/sh",
        "-c",
        'echo "index=$OPENAI4S_ARRAY_INDEX task=$SLURM_ARRAY_TASK_ID"; [ "$OPENAI4S_ARRAY_INDEX" != "$FAIL_AT" ] || exit 3',
      ],
    });
    expect(created.status).toBe(201);
    const id = String(created.body["id"]);
    const end = await waitFor(id, ["COMPLETED", "FAILED", "CANCELLED", "LOST"], 120_000);
    expect(end).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 });
    expect(String(end["message"])).toContain("1 of 6 elements failed (index 3)");
    // Every element's state in the view, the failed one with its exit code (issue 21).
    const [attempt] = end["allocations"] as readonly { readonly array: unknown }[];
    expect(attempt?.array).toEqual({
      size: 6,
      maxConcurrent: 3,
      counts: { COMPLETED: 5, FAILED: 1 },
      indices: { COMPLETED: "0-2,4-5", FAILED: "3" },
      elements: [{ index: 3, phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 }],
      elementsOmitted: 0,
    });
    const logs = readFileSync(join(logDir(id), "stdout.log.4"), "utf8");
    expect(logs).toBe("index=4 task=4\n");
  }, 150_000);

  test("an array over the profile's limit is refused, naming the field", async () => {
    const refused = await api("POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "small",
      array: 5000,
      command: ["/bin/true"],
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain(
      "array must be an integer number of elements in 1..1001",
    );
  });

  test("cancel ends every element, the waiting ones with it", async () => {
    const created = await api("POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "small",
      array: 4,
      maxConcurrent: 1,
      command: ["/bin/sleep", "300"],
    });
    const id = String(created.body["id"]);
    await waitFor(id, ["RUNNING"], 60_000);
    expect((await api("POST", `/v1/workloads/${id}/cancel`)).status).toBe(202);
    const end = await waitFor(id, ["CANCELLED", "FAILED", "COMPLETED", "LOST"], 90_000);
    expect(end).toMatchObject({ phase: "CANCELLED" });
    const [attempt] = end["allocations"] as readonly { readonly array: unknown }[];
    expect(attempt?.array).toMatchObject({ size: 4, maxConcurrent: 1, counts: { CANCELLED: 4 } });
  }, 180_000);

  /** The allocation directory of the workload's one attempt. */
  function logDir(id: string): string {
    const attempts = harness.daemon.layout.workloadDir(id);
    const [allocation] = readdirSync(join(attempts, "allocations"));
    return join(attempts, "allocations", String(allocation));
  }
});
