/**
 * A full spool on the REAL cluster (issue 18): a Slurm job that fills the spool fails, and
 * accounting says only "FAILED, exit code 1"; the workload must end FAILED/SPOOL_FULL (as a
 * local one does), not NONZERO_EXIT that blames the user's code. The spool is a small tmpfs
 * (root, to mount it); the test cluster's nodes are this machine, so they write to it too.
 * Seen failing (NONZERO_EXIT) without the decorator in the Slurm wiring.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { clusterDaemonFor, socketApi, waitForPhase } from "../support/cluster-daemon.ts";
import { startedDaemon } from "../support/daemon-config.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { tempDir } from "../support/temp-dir.ts";
import { mountTmpfs } from "../support/tmpfs.ts";

const isRoot = process.geteuid?.() === 0;
const MIB = 1024 * 1024;

describe.skipIf(testCluster === null || !isRoot)("slurm-cluster: a full spool is named", () => {
  const cluster = testCluster as TestCluster;

  test("the job that filled it ends FAILED/SPOOL_FULL, with the figures", async () => {
    using base = tempDir("o4s-slurm-spoolfull-");
    const unmount = mountTmpfs(join(base.path, "mnt"), "8m", 0o755);
    try {
      const socket = join(base.path, "api.sock");
      const config = clusterDaemonFor(cluster, base.path, socket, {
        overrides: (dir) => ({
          spoolDir: join(dir, "mnt", "spool"),
          spoolLowWaterBytes: 2 * MIB,
        }),
      });
      const api = socketApi(socket);
      const daemon = await startedDaemon(config);
      try {
        const created = await api("POST", "/v1/workloads", {
          kind: "BATCH",
          profile: "small",
          command: ["/bin/sh", "-c", "head -c 16777216 /dev/zero > big"],
        });
        expect(created.status).toBe(201);
        const id = String(created.body["id"]);
        const ended = await waitForPhase(api, id, ["COMPLETED", "FAILED", "CANCELLED"], 90_000);
        expect({ phase: ended["phase"], reason: ended["reason"] }).toEqual({
          phase: "FAILED",
          reason: "SPOOL_FULL",
        });
        expect(String(ended["message"])).toContain("the spool's filesystem was full");
      } finally {
        await daemon.stop();
      }
    } finally {
      unmount();
    }
  }, 150_000);
});
