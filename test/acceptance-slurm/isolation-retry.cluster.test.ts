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
import { systemClock } from "../../src/clock.ts";
import { CLUSTER_ISOLATION_RETRY_MS, createBackend } from "../../src/composition/index.ts";
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
    // Background probes fire when the test says: the first at once, retries by hand.
    const retries: (() => void)[] = [];
    const delays: number[] = [];
    const created = await createBackend("slurm", {
      layout: stateLayout(join(dir, "state"), join(dir, "spool")),
      clusterConfigPath: config,
      selfCommand: [process.execPath, join(import.meta.dir, "../../src/main.ts")],
      clock: systemClock,
      log: silentLog,
      env: { PATH: cluster.path, SLURM_CONF: slurmConf, OPENAI4S_WORKER_LISTEN: "127.0.0.1:9" },
      faults: noFaultPoints,
      runAs: TEST_RUN_AS,
      isolationSchedule: {
        after(delayMs, fn) {
          delays.push(delayMs);
          retries.push(fn);
          return () => {};
        },
      },
    });
    if (created.kind !== "Created") throw new Error(created.message);
    const backend = created.backend;
    const settledVerdict = async () => {
      const deadline = Date.now() + 50_000;
      let verdict = await sessionIsolationVerdict(backend);
      while (verdict.kind === "Unverified" && verdict.message.includes("not verified yet")) {
        if (Date.now() > deadline) break;
        await Bun.sleep(100);
        verdict = await sessionIsolationVerdict(backend);
      }
      return verdict;
    };
    expect((await settledVerdict()).kind).toBe("Unverified");

    copyFileSync(cluster.slurmConf, slurmConf);
    // Admission never probes: until the scheduled retry runs, the verdict stands.
    expect((await sessionIsolationVerdict(backend)).kind).toBe("Unverified");
    expect(delays).toEqual([CLUSTER_ISOLATION_RETRY_MS]);
    retries.shift()?.();
    const deadline = Date.now() + 50_000;
    let verdict = await sessionIsolationVerdict(backend);
    while (verdict.kind !== "Verified" && Date.now() < deadline) {
      await Bun.sleep(200);
      verdict = await sessionIsolationVerdict(backend);
    }
    expect(verdict).toMatchObject({ kind: "Verified" });
  }, 60_000);
});
