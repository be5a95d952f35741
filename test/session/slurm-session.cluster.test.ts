/**
 * Sessions on the REAL Slurm dev cluster (scripts/slurm-test-cluster.sh; gated on
 * OPENAI4S_SLURM_TEST_DIR), through the built binary: `serve --backend slurm` with the worker
 * gateway on. At start the daemon verifies bubblewrap ON THE NODES with a probe allocation,
 * then every launch (the 2-node worker gang included) runs inside it.
 *
 *  - A 2-node session is READY only once both ranks of the current epoch have connected: rank
 *    1 is held back by a wrapper and READY names WORKER_CONNECTED meanwhile.
 *  - A rank from a previous epoch is refused: while epoch 1's rank 1 is still held back, the
 *    attempt is ended the way the reconciler ends one on NODE_FAILURE (the same store
 *    transition: the allocation FAILED, the workload back to PENDING/RETRYING; a real node
 *    failure cannot be produced on the shared cluster without disturbing everyone else), the
 *    daemon starts epoch 2, and when the held ranks are released, epoch 1's latecomer is
 *    refused by the gateway while epoch 2's rank 1 completes the gang.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  applyTransition,
  getAllocation,
  openDatabase,
} from "../../src/adapters/store-sqlite/index.ts";
import { systemClock } from "../../src/lib/clock.ts";
import {
  condition,
  type Daemon,
  ensureBuilt,
  holdingWorker,
  startDaemon,
  type WorkloadView,
} from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const CLUSTER_TOML = `[profiles.pair]
description = "Two nodes for a session gang"
partition = "debug"
nodes = 2
cpus = 1
time_limit_minutes = 10
allow_sessions = true
allow_batch = true
`;

interface Refusal {
  readonly message: string;
  readonly allocationId?: string;
  readonly epoch?: number;
  readonly rank?: number;
  readonly reason?: string;
}

describe.skipIf(testCluster === null)("slurm-cluster sessions", () => {
  const cluster = testCluster as TestCluster;
  let d: Daemon;
  let holder: ReturnType<typeof holdingWorker>;
  let scratch: string;
  const jobIds: string[] = [];

  async function api(method: string, path: string, body?: unknown): Promise<Response> {
    return fetch(`http://localhost${path}`, {
      method,
      unix: d.socket,
      headers: { "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  }

  async function view(id: string): Promise<WorkloadView> {
    return (await (await api("GET", `/v1/workloads/${id}`)).json()) as WorkloadView;
  }

  beforeAll(async () => {
    ensureBuilt();
    scratch = makeTempDir("o4s-slurm-session-");
    const config = join(scratch, "cluster.toml");
    writeFileSync(config, CLUSTER_TOML);
    holder = holdingWorker(scratch, '[ "$SLURM_PROCID" = "1" ]');
    d = await startDaemon({
      args: ["--backend", "slurm", "--cluster-config", config],
      env: {
        SLURM_CONF: cluster.slurmConf,
        PATH: `${process.env["PATH"] ?? "/usr/bin:/bin"}:/usr/sbin:/sbin`,
        OPENAI4S_WORKER_COMMAND: JSON.stringify([holder.command]),
      },
      startTimeoutMs: 120_000,
    });
    // Verification runs in the background: the daemon answers before it is done, and
    // sessions are admitted once the probe on the nodes has passed.
    await eventually(async () => d.log().includes("session isolation verified on the nodes"), {
      what: "session isolation verified on the nodes",
      timeoutMs: 120_000,
    });
  }, 240_000);

  afterAll(async () => {
    holder?.release();
    if (!d) return;
    // Leave nothing running on the shared cluster: every job this test caused.
    const env = { ...process.env, SLURM_CONF: cluster.slurmConf };
    if (jobIds.length > 0) Bun.spawnSync(["scancel", ...jobIds], { env });
    await d.stop();
    removeDir(scratch);
  }, 60_000);

  test("the daemon verified bubblewrap on the nodes before accepting sessions", async () => {
    const lines = d.log().split("\n");
    const verified = lines.findIndex((l) => l.includes("session isolation verified on the nodes"));
    expect(verified).toBeGreaterThanOrEqual(0);
    // The probe asked for the smallest placement: no GPU, one CPU, one minute (sacct of the
    // jobs that ran in this daemon's probe directory).
    const env = { ...process.env, SLURM_CONF: cluster.slurmConf };
    const probeDir = join(`${d.stateDir}-spool`, "backends", "slurm", "isolation-probe");
    // Accounting records a finished job a moment later: polled.
    const rows = await eventually(
      async () => {
        const sacct = Bun.spawnSync(
          ["sacct", "-n", "-X", "-P", "-o", "WorkDir,AllocTRES,Timelimit", "-S", "now-1hour"],
          { env },
        );
        const found = sacct.stdout
          .toString()
          .split("\n")
          .filter((l) => l.includes(probeDir));
        return found.length > 0 ? found : null;
      },
      { what: "the probe job in accounting" },
    );
    for (const row of rows) {
      expect(row).not.toContain("gpu");
      expect(row).toContain("cpu=1,");
      expect(row.endsWith("|00:01:00")).toBe(true);
    }
  }, 30_000);

  test("a 2-node session is READY only once both ranks of the current epoch connected; a previous epoch's rank is refused", async () => {
    holder.hold();
    const created = await api("POST", "/v1/workloads", {
      kind: "SESSION",
      profile: "pair",
      maxAttempts: 2,
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };

    // Epoch 1: the allocation runs on two nodes, rank 0 connects, rank 1 is held back.
    const epoch1 = await eventually(
      async () => {
        const w = await view(id);
        const connected = condition(w, "WORKER_CONNECTED");
        return condition(w, "ALLOCATION_RUNNING")?.status === "TRUE" &&
          connected?.message.startsWith("1 of 2")
          ? w
          : null;
      },
      { what: "epoch 1 running with rank 0 connected", timeoutMs: 90_000, intervalMs: 100 },
    );
    expect(condition(epoch1, "WORKER_CONNECTED")).toMatchObject({
      status: "FALSE",
      reason: "WORKER_MISSING",
      message: "1 of 2 workers of epoch 1 connected; waiting for rank 1",
    });
    expect(condition(epoch1, "READY")).toMatchObject({
      status: "FALSE",
      reason: "WORKER_CONNECTED",
    });
    const first = epoch1.allocations.find((a) => a.epoch === 1);
    if (!first) throw new Error("no epoch 1 allocation");

    // The attempt ends as on a node failure; the daemon moves on to epoch 2.
    const db = openDatabase(join(d.stateDir, "openai4s.db"));
    try {
      const store = { db: db.db, clock: systemClock };
      const a1 = getAllocation(store, first.id);
      if (a1?.handle) jobIds.push(a1.handle);
      const moved = applyTransition(store, {
        allocation: {
          id: first.id,
          expectedPhase: "RUNNING",
          phase: "FAILED",
          reason: "NODE_FAILURE",
          message: "simulated node failure (test)",
          endedAt: Date.now(),
        },
        workload: {
          id,
          expectedPhase: "RUNNING",
          expectedEpoch: 1,
          phase: "PENDING",
          reason: "RETRYING",
          message: "attempt 1 ended NODE_FAILURE; attempt 2 of 2 follows",
        },
      });
      expect(moved).toBe(true);
    } finally {
      db.close();
    }
    const epoch2 = await eventually(
      async () => {
        const w = await view(id);
        return condition(w, "ALLOCATION_RUNNING")?.message.includes("(epoch 2) is RUNNING") &&
          condition(w, "WORKER_CONNECTED")?.message.startsWith("1 of 2 workers of epoch 2")
          ? w
          : null;
      },
      { what: "epoch 2 running with its rank 0 connected", timeoutMs: 90_000, intervalMs: 100 },
    );
    // Epoch 1's rank 0 is still connected, and it does not count for epoch 2.
    expect(condition(epoch2, "READY")?.reason).toBe("WORKER_CONNECTED");
    const second = epoch2.allocations.find((a) => a.epoch === 2);
    if (!second) throw new Error("no epoch 2 allocation");
    {
      const db2 = openDatabase(join(d.stateDir, "openai4s.db"));
      const a2 = getAllocation({ db: db2.db, clock: systemClock }, second.id);
      if (a2?.handle) jobIds.push(a2.handle);
      db2.close();
    }

    // Release both held rank-1 workers: epoch 2's completes the gang, epoch 1's is refused.
    holder.release();
    const ready = await eventually(
      async () => {
        const w = await view(id);
        return condition(w, "READY")?.status === "TRUE" ? w : null;
      },
      { what: "READY on epoch 2", timeoutMs: 60_000, intervalMs: 100 },
    );
    expect(condition(ready, "WORKER_CONNECTED")?.message).toBe(
      "all 2 workers of epoch 2 connected",
    );
    const refusals = await eventually(
      async () => {
        const lines = d
          .log()
          .split("\n")
          .filter((l) => l.includes("credential refused"))
          .map((l) => JSON.parse(l) as Refusal);
        return lines.some((r) => r.allocationId === first.id && r.rank === 1) ? lines : null;
      },
      { what: "the gateway to refuse epoch 1's rank 1", timeoutMs: 30_000, intervalMs: 100 },
    );
    const latecomer = refusals.find((r) => r.allocationId === first.id && r.rank === 1);
    expect(latecomer).toMatchObject({ epoch: 1, rank: 1 });
    expect(["fenced", "wrong epoch"]).toContain(latecomer?.reason ?? "");

    // The gang runs: state is kept across exec in epoch 2's kernel.
    const run = async (code: string) =>
      (await (await api("POST", `/v1/workloads/${id}/exec`, { code })).json()) as {
        status: string;
        output: string;
        error: string | null;
      };
    expect(await run("import socket, os; x = os.environ.get('SLURM_PROCID')")).toMatchObject({
      status: "OK",
    });
    expect(await run("x")).toMatchObject({ status: "OK", output: "'0'", error: null });

    // Cancel: through the barrier, the job ends.
    expect((await api("POST", `/v1/workloads/${id}/cancel`)).status).toBe(202);
    const ended = await eventually(
      async () => {
        const w = await view(id);
        return ["CANCELLED", "FAILED", "COMPLETED", "LOST"].includes(w.phase) ? w : null;
      },
      { what: "the session to end", timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(ended.phase).toBe("CANCELLED");
  }, 300_000);
});
