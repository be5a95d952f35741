/**
 * Preemption on the REAL cluster (scripts/slurm-test-cluster.sh configures PreemptMode=REQUEUE
 * with a higher-tier partition "urgent"). Our jobs are submitted --no-requeue, so a preempted
 * job ends PREEMPTED instead of being rerun under the same identity (measured on 22.05; an
 * administrator's `scontrol requeue` is refused for such a job: "Requested operation is
 * presently disabled"). The daemon then starts a new attempt, epoch + 1 with a new token,
 * while attempts remain, and the events tell the whole story.
 */
import { describe, expect, test } from "bun:test";
import { clusterDaemonForBlock } from "../support/cluster-daemon.ts";
import { eventually } from "../support/eventually.ts";
import {
  adminCommand,
  preemptEveryNode,
  type TestCluster,
  testCluster,
} from "../support/slurm-cluster.ts";

describe.skipIf(testCluster === null)("slurm-cluster preemption", () => {
  const cluster = testCluster as TestCluster;
  const adminJobs: string[] = [];

  const admin = (...args: string[]) => adminCommand(cluster, ...args).trim();

  const { api: call } = clusterDaemonForBlock(cluster, "o4s-slurm-preempt-", {
    cleanup: () => {
      if (adminJobs.length > 0) admin("scancel", ...adminJobs);
    },
  });
  const api = async (method: string, path: string, body?: unknown) =>
    (await call(method, path, body)).body;

  test("a preempted job becomes attempt 2 (new job), and the events show the whole story", async () => {
    const created = await api("POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "small",
      command: ["/bin/sleep", "300"],
      maxAttempts: 2,
    });
    const id = String(created["id"]);
    const workload = () => api("GET", `/v1/workloads/${id}`);
    await eventually(async () => (await workload())["phase"] === "RUNNING", {
      what: "attempt 1 RUNNING",
      timeoutMs: 30_000,
      intervalMs: 250,
    });

    // An administrator's urgent job needs every node: ours is preempted.
    const urgent = preemptEveryNode(cluster);
    expect(urgent).toMatch(/^[0-9]+$/);
    adminJobs.push(urgent);

    await eventually(
      async () => {
        const w = await workload();
        return w["executionEpoch"] === 2 && w["phase"] === "RUNNING";
      },
      { what: "attempt 2 RUNNING", timeoutMs: 60_000, intervalMs: 250 },
    );
    const w = await workload();
    const allocations = w["allocations"] as {
      epoch: number;
      phase: string;
      reason: string | null;
    }[];
    expect(allocations.map((a) => [a.epoch, a.phase, a.reason])).toEqual([
      [1, "FAILED", "PREEMPTED"],
      [2, "RUNNING", null],
    ]);
    const events = (await api("GET", `/v1/workloads/${id}/events`)) as unknown as {
      phase: string;
      reason: string | null;
      message: string | null;
    }[];
    const story = events.map((e) => `${e.phase}/${e.reason}`);
    // RUNNING (attempt 1), then the retry naming why attempt 1 ended, then attempt 2 running.
    const firstRun = story.indexOf("RUNNING/null");
    const retry = events.findIndex((e) => e.reason === "RETRYING");
    expect(firstRun).toBeGreaterThan(0);
    expect(retry).toBeGreaterThan(firstRun);
    expect(events[retry]?.message).toBe("attempt 1 ended PREEMPTED; attempt 2 of 2 follows");
    expect(story.lastIndexOf("RUNNING/null")).toBeGreaterThan(retry);
    await api("POST", `/v1/workloads/${id}/cancel`);
  }, 120_000);
});
