/**
 * The isolation verdict survives a restart, on the REAL cluster (issue 21). Before: after
 * every restart sessions were refused ("not verified yet") until a new probe job had run on
 * the nodes, and on a busy cluster that job waits in the queue like any other.
 *
 * A first daemon verifies the sandbox on the nodes and stops; a job then holds every node,
 * so a new probe cannot run; a second daemon on the same state dir must accept a SESSION
 * within 2 s of being started (it then waits QUEUED behind the job), not refuse it.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { RunningDaemon } from "../../src/apps/daemon/daemon.ts";
import { freePort } from "../support/binary-daemon.ts";
import { clusterDaemonFor, socketApi } from "../support/cluster-daemon.ts";
import { startedDaemon } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const CLUSTER_TOML = [
  "[profiles.small]",
  'description = "one CPU, sessions too"',
  'partition = "debug"',
  "cpus = 1",
  "memory_mb = 50",
  "time_limit_minutes = 5",
  "allow_batch = true",
  "allow_sessions = true",
  "",
].join("\n");

describe.skipIf(testCluster === null)("slurm-cluster: isolation verdict across a restart", () => {
  const cluster = testCluster as TestCluster;
  // Read when the suite is defined, even when it is skipped: no cluster, no conf.
  const env = { ...process.env, SLURM_CONF: testCluster?.slurmConf ?? "" };
  let dir: string | null = null;
  let daemon: RunningDaemon | null = null;
  let holderJob: string | null = null;

  afterAll(async () => {
    await daemon?.stop();
    // Leave nothing running on the shared cluster: the job that held the nodes, and every
    // job of this test's daemons (the session, a queued probe).
    if (holderJob !== null) Bun.spawnSync(["scancel", holderJob], { env });
    if (dir !== null) {
      const ours = Bun.spawnSync(["squeue", "-h", "-o", "%i %Z"], { env })
        .stdout.toString()
        .split("\n")
        .filter((l) => dir !== null && l.includes(dir))
        .map((l) => l.split(" ")[0] ?? "");
      if (ours.length > 0) Bun.spawnSync(["scancel", ...ours], { env });
      removeDir(dir);
    }
  }, 60_000);

  test("a restart accepts a SESSION within 2 s while every node is held by another job", async () => {
    const root = makeTempDir("o4s-isolation-restart-");
    dir = root;
    const socket = join(root, "api.sock");
    const port = await freePort();
    const config = clusterDaemonFor(cluster, root, socket, {
      toml: CLUSTER_TOML,
      env: { OPENAI4S_WORKER_LISTEN: `127.0.0.1:${port}` },
    });
    const api = socketApi(socket);
    const sessionPlaceable = async () => {
      const { body } = await api("GET", "/v1/profiles");
      const profiles = body["profiles"] as { placement: { SESSION?: { placeable: boolean } } }[];
      return profiles[0]?.placement.SESSION?.placeable === true;
    };

    // 1. A first daemon sees the sandbox work on the nodes, then stops.
    daemon = await startedDaemon(config);
    await eventually(sessionPlaceable, { what: "sessions verified", timeoutMs: 120_000 });
    await daemon.stop();
    daemon = null;

    // 2. A job holds every node: a new probe job could only wait in the queue.
    const held = Bun.spawnSync(
      [
        "sbatch",
        "--parsable",
        "-p",
        "debug",
        "-N2",
        "--exclusive",
        "-t",
        "5",
        "--wrap",
        "sleep 300",
      ],
      { env, cwd: root },
    );
    holderJob = held.stdout.toString().trim().split(";")[0] ?? null;
    expect(holderJob).toMatch(/^[0-9]+$/);
    await eventually(
      () =>
        Bun.spawnSync(["squeue", "-h", "-j", holderJob ?? "", "-o", "%t"], { env })
          .stdout.toString()
          .trim() === "R",
      { what: "the holding job running on every node", timeoutMs: 60_000 },
    );

    // 3. The restart, and a SESSION at once.
    const restartedAt = performance.now();
    daemon = await startedDaemon(config);
    const created = await api("POST", "/v1/workloads", { kind: "SESSION", profile: "small" });
    const acceptedMs = performance.now() - restartedAt;
    expect(created.status).toBe(201);
    console.log(`session accepted ${Math.round(acceptedMs)} ms after the restart began`);
    expect(acceptedMs).toBeLessThan(2_000);
    const id = String(created.body["id"]);
    // It waits for the nodes like any job.
    await eventually(
      async () => (await api("GET", `/v1/workloads/${id}`)).body["phase"] === "QUEUED",
      { what: "the session QUEUED", timeoutMs: 30_000 },
    );
    expect((await api("POST", `/v1/workloads/${id}/cancel`)).status).toBe(202);
  }, 240_000);
});
