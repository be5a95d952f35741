/**
 * Issue 33, the Slurm twin of test/daemon/state-dir-full-tmpfs.test.ts, through the built
 * binary on the REAL cluster (root, to mount): the daemon's state dir is a 4 MiB tmpfs (low
 * water 1 MiB; the spool is elsewhere). Jobs run; the state dir is filled a chunk at a time
 * while submissions keep arriving, so some are acknowledged just before the store has room
 * for nothing; the running jobs end while it is full; then it is freed. Every submission
 * answered 201 ends COMPLETED with exactly one Slurm job (sacct, one per workload, never a
 * token twice), none LOST; every other one got 503 STATE_DIR_FULL and left no job; health is
 * degraded while full and ok after, with no restart; the audit log still reads.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { socketApi, waitForPhase } from "../support/cluster-daemon.ts";
import { writeSmallClusterConfig } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { adminCommand, type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";
import { mountTmpfs } from "../support/tmpfs.ts";

const IS_ROOT = process.getuid?.() === 0;

interface Answer {
  readonly status: number;
  readonly id: string | null;
  readonly reason: unknown;
}

describe.skipIf(testCluster === null || !IS_ROOT)("slurm-cluster: a full state dir", () => {
  const cluster = testCluster as TestCluster;
  let base: string | null = null;
  let unmount: (() => void) | null = null;
  let d: Daemon | null = null;

  afterAll(async () => {
    try {
      await d?.stop();
    } finally {
      if (base !== null) {
        // Nothing of this test's left on the shared cluster (its jobs' work dirs are here).
        const ours = adminCommand(cluster, "squeue", "-h", "-o", "%i %Z")
          .split("\n")
          .filter((l) => base !== null && l.includes(base))
          .map((l) => l.split(" ")[0] ?? "");
        if (ours.length > 0) adminCommand(cluster, "scancel", ...ours);
        unmount?.();
        removeDir(base);
      }
    }
  }, 60_000);

  test("every acknowledged job completes once; refusals are 503 STATE_DIR_FULL; health recovers", async () => {
    ensureBuilt();
    base = makeTempDir("o4s-slurm-statefull-");
    const root = base;
    const mnt = join(root, "mnt");
    unmount = mountTmpfs(mnt, "4m", 0o700);
    const stateDir = join(mnt, "state");
    const since = new Date(Date.now() - 60_000).toISOString().slice(0, 19);
    d = await startDaemon({
      args: [
        "--backend",
        "slurm",
        "--cluster-config",
        writeSmallClusterConfig(root),
        "--state-low-water",
        "1M",
      ],
      env: { SLURM_CONF: cluster.slurmConf, PATH: cluster.path },
      stateDir,
      spoolDir: join(root, "spool"),
      gateway: false,
      startTimeoutMs: 60_000,
    });
    const api = socketApi(d.socket);
    // Each job notes its run in its workspace (the spool, off the tmpfs; the sandbox shows
    // the job nothing else); a holder then waits for `go` there.
    const workspace = (id: string) => join(root, "spool", "workloads", id, "workspace");
    const submit = async (hold = false): Promise<Answer> => {
      const wait = hold ? "; while [ ! -e go ]; do sleep 0.2; done" : "";
      const r = await api("POST", "/v1/workloads", {
        kind: "BATCH",
        profile: "small",
        command: ["/bin/sh", "-c", `echo ran >> runs${wait}`],
      });
      return {
        status: r.status,
        id: r.status === 201 ? String(r.body["id"]) : null,
        reason: r.body["reason"],
      };
    };
    const answers: Answer[] = [];
    for (let i = 0; i < 3; i++) answers.push(await submit(true));
    for (const a of answers) expect(a.status).toBe(201);
    for (const a of answers) await waitForPhase(api, String(a.id), ["RUNNING"], 30_000);

    // Fill a chunk at a time while submissions keep arriving, and a while after it is full.
    const filler = join(mnt, "filler");
    const fill = Bun.spawn(
      [
        "/bin/sh",
        "-c",
        `while head -c 131072 /dev/zero >> ${filler} 2>/dev/null; do sleep 0.02; done`,
      ],
      { stdout: "ignore", stderr: "ignore" },
    );
    let filling = true;
    void fill.exited.then(() => {
      filling = false;
    });
    while (filling) {
      answers.push(await submit());
      await Bun.sleep(30);
    }
    const fullAt = Date.now();
    while (Date.now() - fullAt < 1_500) {
      answers.push(await submit());
      await Bun.sleep(30);
    }
    const refused = answers.filter((a) => a.status !== 201);
    expect(refused.length).toBeGreaterThan(0);
    for (const a of refused) expect([a.status, a.reason]).toEqual([503, "STATE_DIR_FULL"]);
    const health = await api("GET", "/healthz");
    expect(health.body["status"]).toBe("degraded");
    expect(String(health.body["problems"])).toContain(stateDir);

    // The running jobs end while the state dir is full; Slurm's own state is not on it.
    for (const a of answers.slice(0, 3)) writeFileSync(join(workspace(String(a.id)), "go"), "");
    const acknowledged = answers.flatMap((a) => (a.id === null ? [] : [a.id]));
    const jobsOf = () =>
      adminCommand(
        cluster,
        "sacct",
        "-X",
        "-n",
        "-P",
        "-S",
        since,
        "-o",
        "JobName%64,WorkDir%300,JobID,State,Start",
      )
        .trim()
        .split("\n")
        .filter((l) => l.includes(join(root, "spool", "workloads")));
    await eventually(
      () => {
        const left = adminCommand(cluster, "squeue", "-h", "-o", "%i %T %r %Z")
          .split("\n")
          .filter((l) => l.includes(root));
        if (left.length > 0) throw new Error(`still queued: ${left.join("; ")}`);
        return true;
      },
      { what: "every job of the daemon ended while the state dir is full", timeoutMs: 30_000 },
    );
    rmSync(filler);
    await eventually(async () => (await api("GET", "/healthz")).body["status"] === "ok", {
      what: "health ok again, without a restart",
      timeoutMs: 10_000,
    });
    // The audit log, written at every request while full, still reads.
    expect((await api("GET", "/v1/audit?limit=10000")).status).toBe(200);
    const after = await submit();
    expect(after.status).toBe(201);
    acknowledged.push(String(after.id));

    const phases: Record<string, unknown> = {};
    for (const id of acknowledged) {
      const ended = await waitForPhase(
        api,
        id,
        ["COMPLETED", "FAILED", "LOST", "CANCELLED"],
        45_000,
      );
      phases[id] = `${ended["phase"]}/${ended["reason"]}`;
    }
    expect(phases).toEqual(
      Object.fromEntries(acknowledged.map((id) => [id, "COMPLETED/EXITED_ZERO"])),
    );
    // One Slurm job per acknowledged workload (its work dir), none for a refused one, and
    // no token (the job name) twice; each ran its command once. Accounting lags the queue.
    const expected = Object.fromEntries(acknowledged.map((id) => [id, 1]));
    const perWorkload = await eventually(
      () => {
        const jobs = jobsOf();
        const tokens = jobs.map((l) => l.split("|")[0]);
        if (new Set(tokens).size !== tokens.length) {
          throw new Error(`a token submitted twice: ${jobs.join("; ")}`);
        }
        const counts: Record<string, number> = {};
        for (const line of jobs) {
          const id = /workloads\/([^/]+)\/workspace/.exec(line)?.[1] ?? line;
          counts[id] = (counts[id] ?? 0) + 1;
        }
        if (!Bun.deepEquals(counts, expected)) throw new Error(JSON.stringify(counts));
        return counts;
      },
      { what: "sacct: one job per acknowledged workload", timeoutMs: 15_000, intervalMs: 250 },
    );
    expect(perWorkload).toEqual(expected);
    for (const id of acknowledged) {
      const runs = readFileSync(join(workspace(id), "runs"), "utf8");
      expect([id, runs]).toEqual([id, "ran\n"]);
    }
    console.log(
      `state dir full: ${acknowledged.length} acknowledged (${answers.length - refused.length - 3} while filling), ${refused.length} refused 503`,
    );
  }, 120_000);
});
