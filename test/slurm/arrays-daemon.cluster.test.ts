/**
 * Job arrays through the daemon (composition root, reconciler, API, sandboxed launch) on the
 * REAL cluster: one POST, each element told its index inside the sandbox, the array's phase
 * by the documented rules with the failed index named, and cancel ending every element.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { RunningDaemon } from "../../src/apps/daemon/daemon.ts";
import {
  clusterDaemonConfig,
  startedDaemon,
  writeSmallClusterConfig,
} from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

describe.skipIf(testCluster === null)("slurm-cluster daemon: job arrays", () => {
  const cluster = testCluster as TestCluster;
  let dir: string;
  let socket: string;
  let daemon: RunningDaemon;

  const api = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`http://localhost${path}`, {
      unix: socket,
      method,
      ...(body === undefined
        ? {}
        : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  const waitFor = (id: string, phases: readonly string[], deadlineMs: number) =>
    eventually(
      async () => {
        const { body } = await api("GET", `/v1/workloads/${id}`);
        if (phases.includes(String(body["phase"]))) return body;
        throw new Error(`workload ${id} still ${JSON.stringify(body)}`);
      },
      { timeoutMs: deadlineMs, intervalMs: 250 },
    );

  beforeAll(async () => {
    dir = makeTempDir("o4s-slurm-arrays-daemon-");
    socket = join(dir, "api.sock");
    const config = writeSmallClusterConfig(dir);
    daemon = await startedDaemon(
      clusterDaemonConfig(cluster, { dir, socket, clusterConfigPath: config }),
    );
  });

  afterAll(async () => {
    await daemon?.stop();
    removeDir(dir);
  });

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
  }, 180_000);

  /** The allocation directory of the workload's one attempt. */
  function logDir(id: string): string {
    const attempts = daemon.layout.workloadDir(id);
    const [allocation] = readdirSync(join(attempts, "allocations"));
    return join(attempts, "allocations", String(allocation));
  }
});
