/**
 * `serve --backend slurm --cluster-config FILE`, in process, against the REAL cluster: the
 * composition root's slurm entry, the reconciler and the API on top of the backend.
 */
import { describe, expect, test } from "bun:test";
import { clusterDaemonForBlock, waitForPhase } from "../support/cluster-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";

describe.skipIf(testCluster === null)("slurm-cluster daemon", () => {
  const cluster = testCluster as TestCluster;
  const { api } = clusterDaemonForBlock(cluster, "o4s-slurm-daemon-");
  const waitFor = (id: string, phases: readonly string[], deadlineMs: number) =>
    waitForPhase(api, id, phases, deadlineMs);

  test("profiles show no scheduler vocabulary; diagnostics name the backend", async () => {
    const profiles = await api("GET", "/v1/profiles");
    expect(profiles.status).toBe(200);
    expect(JSON.stringify(profiles.body)).not.toMatch(/partition|qos|debug/i);
    const diagnostics = await api("GET", "/v1/diagnostics");
    expect(JSON.stringify(diagnostics.body)).toContain("slurm");
  });

  test("through the wrapped launch path, the scheduler's env rules refuse at the API (400 naming the variable)", async () => {
    // Refused before anything is written: no workload, so nothing for the reconciler to submit
    // (sbatch calls are not counted here: the isolation probe may submit one at any time).
    const workloads = async () => {
      const { body } = await api("GET", "/v1/workloads?limit=500");
      return (body["items"] as unknown[]).length;
    };
    const before = await workloads();
    for (const env of [
      { X: "1,ALL" },
      { X: "line\nnext" },
      { SLURM_NTASKS: "5" },
      { SBATCH_PARTITION: "other" },
    ]) {
      const refused = await api("POST", "/v1/workloads", {
        kind: "BATCH",
        profile: "small",
        command: ["/bin/true"],
        env,
      });
      expect(refused.status).toBe(400);
      const name = Object.keys(env)[0];
      const errors = refused.body["errors"] as { path: string; message: string }[];
      expect(errors.map((e) => e.path)).toEqual([`env.${name}`]);
    }
    expect(await workloads()).toBe(before);
  });

  test("a BATCH workload's nonzero exit reaches the API as FAILED/NONZERO_EXIT", async () => {
    const created = await api("POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "small",
      command: ["/bin/sh", "-c", "exit 3"],
    });
    expect(created.status).toBe(201);
    const end = await waitFor(
      String(created.body["id"]),
      ["COMPLETED", "FAILED", "CANCELLED", "LOST"],
      60_000,
    );
    expect(end).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 });
  }, 90_000);

  test("a step runs inside the live allocation; after cancel the API refuses (INV-4)", async () => {
    const created = await api("POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "small",
      command: ["/bin/sleep", "300"],
    });
    const id = String(created.body["id"]);
    const seen = await waitFor(id, ["RUNNING"], 30_000);
    // The scheduler's job id is in the view, and finds the workload again (issue 21).
    const attempts = seen["allocations"] as { backendJobId: string | null }[];
    const jobId = attempts[0]?.backendJobId ?? "";
    expect(jobId).toMatch(/^[0-9]+$/);
    const found = await api("GET", `/v1/workloads?backendJobId=${jobId}`);
    expect((found.body["items"] as { id: string }[]).map((w) => w.id)).toEqual([id]);
    // RUNNING was seen by this daemon's reconciler: confirmed, not read back from the store.
    await eventually(
      async () => {
        const { body } = await api("GET", `/v1/workloads/${id}`);
        if (typeof body["phaseConfirmedAt"] !== "string") throw new Error("not confirmed yet");
        return true;
      },
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    const task = await api("POST", `/v1/workloads/${id}/tasks`, {
      command: ["/bin/sh", "-c", "echo hi"],
    });
    expect(task).toMatchObject({ status: 200, body: { exitCode: 0, stdout: "hi\n" } });
    expect((await api("POST", `/v1/workloads/${id}/cancel`)).status).toBe(202);
    const end = await waitFor(id, ["CANCELLED", "FAILED", "COMPLETED"], 60_000);
    expect(end).toMatchObject({ phase: "CANCELLED" });
    const refused = await api("POST", `/v1/workloads/${id}/tasks`, { command: ["/bin/true"] });
    expect(refused.status).toBe(409);
  }, 120_000);
});
