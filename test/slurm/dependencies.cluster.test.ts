/**
 * Dependencies on the REAL cluster (issue 35): a dependent job starts only after its parent
 * completed (its Slurm job is not even submitted before), and one whose parent failed is
 * ended CANCELLED, DEPENDENCY_NEVER_SATISFIED, with the parent named and no job submitted.
 */
import { describe, expect, test } from "bun:test";
import { clusterDaemonForBlock, waitForPhase } from "../support/cluster-daemon.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";

const ENDED = ["COMPLETED", "FAILED", "CANCELLED", "LOST"];

interface AllocationView {
  readonly backendJobId: string | null;
  readonly submittedAt: string | null;
  readonly startedAt: string | null;
  readonly endedAt: string | null;
}

describe.skipIf(testCluster === null)("slurm-cluster: dependencies", () => {
  const cluster = testCluster as TestCluster;
  const d = clusterDaemonForBlock(cluster, "o4s-slurm-deps-");

  async function submit(body: Record<string, unknown>): Promise<string> {
    const res = await d.api("POST", "/v1/workloads", { kind: "BATCH", profile: "small", ...body });
    expect(res.status).toBe(201);
    return String(res.body["id"]);
  }

  test("afterok runs after the parent completed; a failed parent cancels its dependent", async () => {
    const parent = await submit({ command: ["/bin/sh", "-c", "sleep 2"] });
    const child = await submit({ command: ["/bin/true"], afterOk: [parent] });
    const failing = await submit({ command: ["/bin/sh", "-c", "exit 3"] });
    const orphan = await submit({ command: ["/bin/true"], afterOk: [failing] });

    const p = await waitForPhase(d.api, parent, ENDED, 90_000);
    const c = await waitForPhase(d.api, child, ENDED, 90_000);
    expect([p["phase"], c["phase"]]).toEqual(["COMPLETED", "COMPLETED"]);
    const pa = (p["allocations"] as AllocationView[]).at(-1);
    const ca = (c["allocations"] as AllocationView[]).at(-1);
    expect(pa?.endedAt).not.toBeNull();
    expect(ca?.backendJobId).not.toBeNull();
    // The dependent's job went to Slurm only once the parent had ended, and started after.
    expect(Date.parse(ca?.submittedAt ?? "")).toBeGreaterThanOrEqual(Date.parse(pa?.endedAt ?? ""));
    expect(Date.parse(ca?.startedAt ?? "")).toBeGreaterThanOrEqual(Date.parse(pa?.endedAt ?? ""));

    const o = await waitForPhase(d.api, orphan, ENDED, 90_000);
    expect({ phase: o["phase"], reason: o["reason"] }).toEqual({
      phase: "CANCELLED",
      reason: "DEPENDENCY_NEVER_SATISFIED",
    });
    expect(String(o["message"])).toContain(failing);
    expect(o["allocations"]).toEqual([]);
  }, 150_000);
});
