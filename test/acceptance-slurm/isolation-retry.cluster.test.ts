/**
 * `serve --backend slurm` started while the cluster cannot answer (controller down, a broken
 * slurm.conf) must offer sessions once the cluster is back, without a daemon restart. The
 * defect: the start-up isolation probe's "Unverified" was kept for the daemon's lifetime, so
 * one outage at start switched sessions off until someone restarted the daemon.
 *
 * Against the REAL cluster, without touching its controller: the daemon's SLURM_CONF is a
 * private copy that is garbage at start and the real configuration afterwards.
 */

import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { manualClock } from "../../src/clock.ts";
import { CLUSTER_ISOLATION_RETRY_MS, createBackend } from "../../src/composition-root.ts";
import { noFaultPoints } from "../../src/fault-point.ts";
import { silentLog } from "../../src/log.ts";
import { stateLayout } from "../../src/orchestration/layout.ts";
import { sessionIsolationVerdict } from "../../src/orchestration/ports.ts";
import { type TestCluster, testCluster } from "../slurm/cluster-env.ts";
import { TEST_RUN_AS } from "../support/run-as.ts";

describe.skipIf(testCluster === null)("slurm-cluster: isolation after a start-up outage", () => {
  const cluster = testCluster as TestCluster;
  const dir = mkdtempSync(join(tmpdir(), "o4s-acc-isolation-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("an Unverified start is probed again once the cluster answers", async () => {
    const slurmConf = join(dir, "slurm.conf");
    writeFileSync(slurmConf, "garbage\n");
    const config = join(dir, "cluster.toml");
    writeFileSync(
      config,
      [
        "[profiles.small]",
        'description = "one CPU"',
        'partition = "debug"',
        "memory_mb = 50",
        "time_limit_minutes = 5",
        "allow_sessions = true",
        "",
      ].join("\n"),
    );
    const clock = manualClock(Date.now());
    const created = await createBackend("slurm", {
      layout: stateLayout(join(dir, "state")),
      clusterConfigPath: config,
      selfCommand: [process.execPath, join(import.meta.dir, "../../src/main.ts")],
      clock,
      log: silentLog,
      env: { PATH: cluster.path, SLURM_CONF: slurmConf, OPENAI4S_WORKER_LISTEN: "127.0.0.1:9" },
      faults: noFaultPoints,
      runAs: TEST_RUN_AS,
    });
    if (created.kind !== "Created") throw new Error(created.message);
    const backend = created.backend;
    expect((await sessionIsolationVerdict(backend)).kind).toBe("Unverified");

    copyFileSync(cluster.slurmConf, slurmConf);
    // A retry is not a probe per request: within the retry interval the verdict stands.
    expect((await sessionIsolationVerdict(backend)).kind).toBe("Unverified");
    clock.advance(CLUSTER_ISOLATION_RETRY_MS + 1);
    const verdict = await sessionIsolationVerdict(backend);
    expect(verdict).toMatchObject({ kind: "Verified" });
  }, 60_000);
});
