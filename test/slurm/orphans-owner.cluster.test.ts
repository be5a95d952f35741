/**
 * Jobs nobody owns when jobs run as their owners (issue 22), on the REAL cluster, root only: a
 * daemon whose profile has `run_as = "owner"` submits a scientist's job as the scientist's
 * account, so the job is not the service account's. After the store is restored from a copy
 * older than that job, the sweep still finds it and (policy `cancel`) cancels it, while the
 * scientist's own jobs, submitted by hand under the same account, are never touched: the
 * sweep lists every account, as the observe path does, and keeps only this daemon's comments.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { jobComment } from "../../src/adapters/backend-slurm/orphan-sweeper.ts";
import type { RunningDaemon } from "../../src/apps/daemon/daemon.ts";
import {
  backUpStore,
  clusterDaemonFor,
  OWNER_PROFILE_TOML,
  restoreStore,
  type SocketApi,
  socketApi,
  tcpBase,
} from "../support/cluster-daemon.ts";
import { startedDaemon } from "../support/daemon-config.ts";
import { eventually } from "../support/eventually.ts";
import { createOwnerAccount, type OwnerAccount, principalToken } from "../support/owner-account.ts";
import { adminCommand, type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { newToken } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;

interface Started {
  readonly daemon: RunningDaemon;
  readonly api: SocketApi;
  readonly base: string;
}

describe.skipIf(testCluster === null || !IS_ROOT)(
  "slurm-cluster orphan sweep, jobs run as their owners",
  () => {
    const cluster = testCluster as TestCluster;
    let dir: string;
    let account: OwnerAccount;
    let running: Started | null = null;

    async function start(policy: string): Promise<Started> {
      const socket = join(dir, "api.sock");
      const daemon = await startedDaemon(
        clusterDaemonFor(cluster, dir, socket, {
          toml: OWNER_PROFILE_TOML,
          env: { OPENAI4S_ORPHAN_POLICY: policy, OPENAI4S_ORPHAN_SWEEP_SECONDS: "1" },
          tcp: true,
        }),
      );
      running = { daemon, api: socketApi(socket), base: tcpBase(daemon) };
      return running;
    }

    async function stop(): Promise<void> {
      await running?.daemon.stop();
      running = null;
    }

    function state(jobId: string): string {
      return adminCommand(cluster, "squeue", "-h", "-j", jobId, "-o", "%T").trim();
    }

    /** A job the scientist submitted by hand (root submits it under their account). */
    function scientistsOwnJob(comment: string | null): string {
      const out = adminCommand(
        cluster,
        "sbatch",
        "--parsable",
        `--uid=${account.uid}`,
        `--gid=${account.gid}`,
        "--partition=debug",
        "--mem=20",
        "--output=/dev/null",
        "--chdir=/tmp",
        ...(comment === null ? [] : [`--comment=${comment}`]),
        "--wrap=sleep 300",
      ).trim();
      expect(out).toMatch(/^[0-9]+$/);
      return out;
    }

    beforeAll(() => {
      dir = makeTempDir("o4s-slurm-orphans-owner-");
      // The spool's parent, as a site's would be: the owner's job passes through to its own
      // directories (mkdtemp made it 0700).
      chmodSync(dir, 0o711);
      account = createOwnerAccount();
    });

    afterAll(async () => {
      await stop();
      if (account) {
        adminCommand(cluster, "scancel", `--user=${account.user}`);
        account.remove();
      }
      if (dir) removeDir(dir);
    }, 60_000);

    test("the owner's forgotten job is cancelled; the scientist's own jobs are not", async () => {
      let daemon = await start("report");
      const adminToken = readFileSync(daemon.daemon.layout.adminToken, "utf8").trim();
      const token = await principalToken(daemon.base, adminToken, "sci", account.user);
      // The backup: the principal exists, the job below does not yet.
      await stop();
      const backup = join(dir, "backup");
      mkdirSync(backup);
      backUpStore(join(dir, "state"), backup);

      daemon = await start("report");
      const created = await fetch(`${daemon.base}/v1/workloads`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ kind: "BATCH", profile: "mine", command: ["/bin/sleep", "300"] }),
      });
      expect(created.status).toBe(201);
      const id = String(((await created.json()) as { id: string }).id);
      const view = await eventually(
        async () => {
          const { body } = await daemon.api("GET", `/v1/workloads/${id}`);
          return body["phase"] === "RUNNING" ? body : null;
        },
        { what: `workload ${id} RUNNING`, timeoutMs: 60_000, intervalMs: 250 },
      );
      const attempts = view["allocations"] as { backendJobId: string | null }[];
      const forgotten = attempts.at(-1)?.backendJobId ?? "";
      expect(adminCommand(cluster, "squeue", "-h", "-j", forgotten, "-o", "%u").trim()).toBe(
        account.user,
      );
      // The scientist's own jobs: no comment, a bare token, another daemon's comment.
      const own = [
        scientistsOwnJob(null),
        scientistsOwnJob(newToken()),
        scientistsOwnJob(jobComment(newToken(), "zzzzzzzzzzzz")),
      ];
      await stop();
      restoreStore(backup, join(dir, "state"));

      daemon = await start("cancel");
      await eventually(
        async () => (["RUNNING", "PENDING"].includes(state(forgotten)) ? null : true),
        {
          what: `the forgotten job ${forgotten} cancelled`,
          timeoutMs: 30_000,
          intervalMs: 250,
        },
      );
      // The latest sweep may already have run after the cancel (then it lists nothing): it
      // never lists one of the scientist's own jobs.
      const { body } = await daemon.api("GET", "/v1/diagnostics");
      const orphans = (body["backend"] as { orphans: { jobs: { handle: string }[] } }).orphans;
      for (const job of orphans.jobs) expect(job.handle).toBe(forgotten);
      for (const jobId of own)
        expect([jobId, state(jobId)]).toEqual([
          jobId,
          expect.stringMatching(/^(RUNNING|PENDING)$/),
        ]);
    }, 180_000);
  },
);
