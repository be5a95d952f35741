/**
 * A Slurm job knows which job it is, on the REAL cluster: a session's kernel and a BATCH job
 * see SLURM_JOB_ID (the allocation's backendJobId) and the job's own placement variables.
 * Before, a session's sandboxed worker got only its rank and the deadline by name, and its
 * kernel had no SLURM_JOB_ID: `scontrol show job $SLURM_JOB_ID` from a notebook failed.
 */
import { describe, expect, test } from "bun:test";
import { freePort } from "../support/binary-daemon.ts";
import { clusterDaemonForBlock, waitForPhase } from "../support/cluster-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";

const TOML = [
  "[profiles.small]",
  'description = "one CPU, sessions too"',
  'partition = "debug"',
  "cpus = 1",
  "memory_mb = 100",
  "time_limit_minutes = 5",
  "allow_batch = true",
  "allow_sessions = true",
  "",
].join("\n");

const PRINT_ENV =
  "import os, json; print(json.dumps({k: os.environ.get(k) for k in ('SLURM_JOB_ID', 'SLURM_JOB_PARTITION', 'SLURM_JOB_NODELIST', 'SLURM_CPUS_ON_NODE', 'SLURM_CONF')}))";

const port = await freePort();

describe.skipIf(testCluster === null)("slurm-cluster: a job's own Slurm variables", () => {
  const d = clusterDaemonForBlock(testCluster as TestCluster, "o4s-job-env-", {
    toml: TOML,
    env: { OPENAI4S_WORKER_LISTEN: `127.0.0.1:${port}` },
  });

  test("a session's kernel sees SLURM_JOB_ID (its backendJobId) and its placement, not SLURM_CONF", async () => {
    await eventually(
      async () => {
        const { body } = await d.api("GET", "/v1/profiles");
        const profiles = body["profiles"] as { placement: { SESSION?: { placeable: boolean } } }[];
        return profiles[0]?.placement.SESSION?.placeable === true;
      },
      { what: "sessions verified on the nodes", timeoutMs: 120_000 },
    );
    const created = await d.api("POST", "/v1/workloads", { kind: "SESSION", profile: "small" });
    expect(created.status).toBe(201);
    const id = String(created.body["id"]);
    try {
      const ready = await eventually(
        async () => {
          const { body } = await d.api("GET", `/v1/workloads/${id}`);
          const conditions = body["conditions"] as { type: string; status: string }[];
          if (conditions.some((c) => c.type === "READY" && c.status === "TRUE")) return body;
          throw new Error(`not READY: ${JSON.stringify(body)}`);
        },
        { what: "the session READY", timeoutMs: 120_000, intervalMs: 500 },
      );
      const jobId = (ready["allocations"] as { backendJobId: string | null }[])[0]?.backendJobId;
      expect(jobId).toMatch(/^[0-9]+$/);
      const ran = await d.api("POST", `/v1/workloads/${id}/exec`, { code: PRINT_ENV });
      expect(ran.status).toBe(200);
      const seen = JSON.parse(String(ran.body["output"]).trim()) as Record<string, string | null>;
      expect(seen["SLURM_JOB_ID"]).toBe(jobId ?? "missing");
      expect(seen["SLURM_JOB_PARTITION"]).toBe("debug");
      expect(seen["SLURM_JOB_NODELIST"]).toMatch(/^n[12]$/);
      expect(seen["SLURM_CPUS_ON_NODE"]).toMatch(/^[0-9]+$/);
      // The scheduler's config stays the daemon's: a job talks to no controller through us.
      expect(seen["SLURM_CONF"]).toBeNull();
    } finally {
      await d.api("POST", `/v1/workloads/${id}/cancel`);
    }
  }, 300_000);

  test("a single-task BATCH job sees the same", async () => {
    const created = await d.api("POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "small",
      command: ["sh", "-c", 'echo "id=$SLURM_JOB_ID part=$SLURM_JOB_PARTITION"'],
    });
    expect(created.status).toBe(201);
    const id = String(created.body["id"]);
    const done = await waitForPhase(d.api, id, ["COMPLETED", "FAILED", "LOST"], 120_000);
    expect(done["phase"]).toBe("COMPLETED");
    const jobId = (done["allocations"] as { backendJobId: string }[])[0]?.backendJobId;
    const log = await d.api("GET", `/v1/workloads/${id}/logs`);
    expect(log.text.trim()).toBe(`id=${jobId} part=debug`);
  }, 180_000);
});
