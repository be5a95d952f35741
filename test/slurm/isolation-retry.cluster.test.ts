/**
 * `serve --backend slurm` started while the cluster cannot answer (controller down, a broken
 * slurm.conf) must offer sessions once the cluster is back, without a daemon restart. The
 * defect: the start-up isolation probe's "Unverified" was kept for the daemon's lifetime, so
 * one outage at start switched sessions off until someone restarted the daemon.
 *
 * Against the REAL cluster, without touching its controller: the daemon's SLURM_CONF is a
 * private copy that is garbage at start and the real configuration afterwards.
 */

import { describe, expect, test } from "bun:test";
import { copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fixedIdentities } from "../../src/adapters/isolation-bwrap/uid-leases.ts";
import {
  CLUSTER_ISOLATION_RETRY_MS,
  createBackend,
} from "../../src/apps/daemon/composition/index.ts";
import { parseDaemonSettings } from "../../src/apps/daemon/config.ts";
import { stateLayout } from "../../src/core/layout.ts";
import { sessionIsolationVerdict } from "../../src/core/ports/allocation-backend.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { noFaultPoints } from "../../src/lib/fault-point.ts";
import { silentLog } from "../../src/lib/log.ts";
import { eventually } from "../support/eventually.ts";
import { TEST_RUN_AS } from "../support/run-as.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { tempDirs } from "../support/temp-dir.ts";

describe.skipIf(testCluster === null)("slurm-cluster: isolation after a start-up outage", () => {
  const cluster = testCluster as TestCluster;
  // Made by the test, not the describe body: a skipped describe still runs its body but
  // never its afterAll, and left this directory behind on every run without a cluster.
  const tempDir = tempDirs("o4s-isolation-retry-");

  test("an Unverified start is probed again once the cluster answers", async () => {
    const dir = tempDir();
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
    const env = {
      PATH: cluster.path,
      SLURM_CONF: slurmConf,
      OPENAI4S_WORKER_LISTEN: "127.0.0.1:9",
    };
    const selfCommand = [process.execPath, join(import.meta.dir, "../../src/main.ts")];
    const parsed = parseDaemonSettings(env, selfCommand);
    if (parsed.kind !== "Parsed") throw new Error(JSON.stringify(parsed.errors));
    const created = await createBackend("slurm", {
      layout: stateLayout(join(dir, "state"), join(dir, "spool")),
      clusterConfigPath: config,
      selfCommand,
      clock: systemClock,
      log: silentLog,
      env,
      settings: parsed.settings,
      faults: noFaultPoints,
      identities: fixedIdentities(TEST_RUN_AS),
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
      const settled = async () => {
        const verdict = await sessionIsolationVerdict(backend);
        const pending =
          verdict.kind === "Unverified" && verdict.message.includes("not verified yet");
        return pending ? null : verdict;
      };
      return await eventually(settled, { timeoutMs: 50_000, intervalMs: 100 });
    };
    expect((await settledVerdict()).kind).toBe("Unverified");

    copyFileSync(cluster.slurmConf, slurmConf);
    // Admission never probes: until the scheduled retry runs, the verdict stands.
    expect((await sessionIsolationVerdict(backend)).kind).toBe("Unverified");
    expect(delays).toEqual([CLUSTER_ISOLATION_RETRY_MS]);
    retries.shift()?.();
    let verdict = await sessionIsolationVerdict(backend);
    const verified = async () => {
      verdict = await sessionIsolationVerdict(backend);
      return verdict.kind === "Verified";
    };
    // The assertion below on the last verdict says more than a timeout would.
    await eventually(verified, { timeoutMs: 50_000, intervalMs: 200 }).catch(() => {});
    expect(verdict).toMatchObject({ kind: "Verified" });
  }, 60_000);
});
