/**
 * Jobs nobody owns, on the REAL cluster: a daemon's store is restored from an older copy while
 * a job it submitted later still runs. The sweep reports that job (policy `report`), cancels it
 * (policy `cancel`), never touches the job the restored store still knows, and a second daemon
 * (another state dir, so another owner id) on the same cluster and account never touches
 * either.
 */

import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { RunningDaemon } from "../../src/apps/daemon/daemon.ts";
import {
  backUpStore,
  clusterDaemonFor,
  restoreStore,
  socketApi,
} from "../support/cluster-daemon.ts";
import { startedDaemon } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { realBroker, type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

describe.skipIf(testCluster === null)("slurm-cluster orphan sweep", () => {
  const cluster = testCluster as TestCluster;
  let dir: string;
  const running: RunningDaemon[] = [];
  const jobIds: string[] = [];

  async function start(
    name: string,
    policy: string,
  ): Promise<{ daemon: RunningDaemon; socket: string }> {
    const socket = join(dir, `${name}-${running.length}.sock`);
    const daemon = await startedDaemon(
      clusterDaemonFor(cluster, dir, socket, {
        env: { OPENAI4S_ORPHAN_POLICY: policy, OPENAI4S_ORPHAN_SWEEP_SECONDS: "1" },
        overrides: () => ({ stateDir: join(dir, name), spoolDir: join(dir, `${name}-spool`) }),
      }),
    );
    running.push(daemon);
    return { daemon, socket };
  }

  async function stop(daemon: RunningDaemon): Promise<void> {
    await daemon.stop();
    running.splice(running.indexOf(daemon), 1);
  }

  const api = (socket: string, method: string, path: string, body?: unknown) =>
    socketApi(socket)(method, path, body);

  /** Submits a sleeper and waits until it runs; returns its job id (read from the store). */
  async function runningJob(socket: string, stateDir: string): Promise<string> {
    const created = await api(socket, "POST", "/v1/workloads", {
      kind: "BATCH",
      profile: "small",
      command: ["/bin/sleep", "300"],
    });
    expect(created.status).toBe(201);
    const id = String(created.body["id"]);
    await eventually(
      async () =>
        (await api(socket, "GET", `/v1/workloads/${id}`)).body["phase"] === "RUNNING" ? true : null,
      { what: `workload ${id} RUNNING`, timeoutMs: 30_000, intervalMs: 250 },
    );
    const db = new Database(join(stateDir, "openai4s.db"), { readonly: true });
    try {
      const row = db
        .query<{ handle: string }, [string]>("SELECT handle FROM allocations WHERE workload_id = ?")
        .get(id);
      if (!row) throw new Error(`no allocation for ${id}`);
      jobIds.push(row.handle);
      return row.handle;
    } finally {
      db.close();
    }
  }

  async function orphansOf(socket: string) {
    const { body } = await api(socket, "GET", "/v1/diagnostics");
    const backend = body["backend"] as {
      orphans?: { lastSweepAt: string | null; jobs: { handle: string; action: string }[] } | null;
    };
    return backend.orphans ?? null;
  }

  function live(jobId: string): boolean {
    const out = Bun.spawnSync({
      cmd: ["squeue", "-h", "-j", jobId, "-o", "%T"],
      env: { PATH: cluster.path, SLURM_CONF: cluster.slurmConf },
      stdout: "pipe",
      stderr: "pipe",
    });
    return ["RUNNING", "PENDING"].includes(out.stdout.toString().trim());
  }

  beforeAll(() => {
    dir = makeTempDir("o4s-slurm-orphans-");
  });

  afterAll(async () => {
    for (const d of [...running]) await d.stop();
    if (jobIds.length > 0) await realBroker(cluster).cancelJobs(jobIds);
    removeDir(dir);
  });

  test("a restored store: the job it forgot is reported, then cancelled; the known one and another daemon's are untouched", async () => {
    const stateDir = join(dir, "a");
    let a = await start("a", "report");
    const known = await runningJob(a.socket, stateDir);
    // The backup: taken with the daemon stopped, as a nightly copy of a quiet store would be.
    await stop(a.daemon);
    const backup = join(dir, "backup");
    mkdirSync(backup);
    backUpStore(stateDir, backup);
    a = await start("a", "report");
    const forgotten = await runningJob(a.socket, stateDir);
    // A second daemon on the same cluster and account, with a job of its own.
    const other = await start("b", "cancel");
    const othersJob = await runningJob(other.socket, join(dir, "b"));
    await stop(a.daemon);
    restoreStore(backup, stateDir);

    a = await start("a", "report");
    const reported = await eventually(
      async () => {
        const o = await orphansOf(a.socket);
        return o !== null && o.lastSweepAt !== null ? o : null;
      },
      { what: "a sweep after the restore", timeoutMs: 20_000, intervalMs: 250 },
    );
    expect(reported.jobs.map((j) => [j.handle, j.action])).toEqual([[forgotten, "REPORTED"]]);
    const metrics = (await api(a.socket, "GET", "/metrics")).text;
    expect(metrics).toContain("openai4s_orphan_jobs 1");
    expect(live(forgotten)).toBe(true);

    // The other daemon (policy cancel) never took a's jobs for its own orphans.
    const othersView = await orphansOf(other.socket);
    expect(othersView?.jobs ?? []).toEqual([]);
    expect(live(known) && live(forgotten) && live(othersJob)).toBe(true);

    await stop(a.daemon);
    a = await start("a", "cancel");
    await eventually(async () => (live(forgotten) ? null : true), {
      what: "the forgotten job cancelled",
      timeoutMs: 20_000,
      intervalMs: 250,
    });
    expect(live(known)).toBe(true);
    expect(live(othersJob)).toBe(true);
  }, 150_000);
});
