/**
 * The scientist's notebook (test/fixtures/scientist.ipynb) on the REAL Slurm dev cluster
 * (scripts/slurm-test-cluster.sh; gated on OPENAI4S_SLURM_TEST_DIR): the built binary with
 * `serve --backend slurm`, the kernel a scheduler job on a node, and nbclient directly
 * against the daemon's Jupyter server API with a principal's token (issue 30). The same run
 * as test/jupyter/scientist-notebook.test.ts on the local backend: numpy and pandas, a PNG, a
 * process pool, 10 MB printed (whole in the file the truncation line names, read back through
 * /api/contents from the shared spool), a 90 s cell, a file uploaded and a file written.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { runScientistNotebook, scientistNotebookMissing } from "../support/scientist-notebook.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

// Two CPUs: the notebook's process pool has two workers.
const CLUSTER_TOML = `[profiles.lab]
description = "Two CPUs for a scientist's notebook"
partition = "debug"
cpus = 2
memory_mb = 800
time_limit_minutes = 10
allow_sessions = true
allow_batch = false
`;

const missing = scientistNotebookMissing();
if (missing !== null) console.log(`skipping the scientist's notebook on Slurm: ${missing}`);

describe.skipIf(testCluster === null || missing !== null)(
  "the scientist's notebook through nbclient, on Slurm",
  () => {
    const cluster = testCluster as TestCluster;
    let d: Daemon;
    let scratch: string;
    let port: number;
    let token: string;

    beforeAll(async () => {
      ensureBuilt();
      scratch = makeTempDir("o4s-slurm-notebook-");
      const config = join(scratch, "cluster.toml");
      writeFileSync(config, CLUSTER_TOML);
      port = await freePort();
      d = await startDaemon({
        args: ["--backend", "slurm", "--cluster-config", config, "--listen", `127.0.0.1:${port}`],
        env: {
          SLURM_CONF: cluster.slurmConf,
          PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}:/usr/sbin:/sbin`,
        },
        startTimeoutMs: 120_000,
      });
      await eventually(async () => d.log().includes("session isolation verified on the nodes"), {
        what: "session isolation verified on the nodes",
        timeoutMs: 120_000,
      });
      expect((await d.cli("principal", "add", "alice")).code).toBe(0);
      token = (await d.cli("token", "issue", "alice")).stdout.trim();
    }, 300_000);

    afterAll(async () => {
      if (!d) return;
      // Leave nothing running on the shared cluster: cancel this daemon's workloads first.
      const listed = await d.cli("list", "--json");
      for (const w of (JSON.parse(listed.stdout || '{"items":[]}') as { items: { id: string }[] })
        .items) {
        await d.cli("cancel", w.id);
      }
      await d.stop();
      removeDir(scratch);
    }, 120_000);

    test("runs end to end as alice, the kernel a Slurm job", async () => {
      const run = await runScientistNotebook({
        url: `http://127.0.0.1:${port}`,
        token,
        kernel: "lab",
        dir: scratch,
      });
      console.log(`slurm: the scientist's notebook ran in ${(run.wallMs / 1000).toFixed(1)} s`);
      const workload = (await d.show(run.directory)) as unknown as {
        owner: string | null;
        allocations: readonly { readonly backendJobId: string | null }[];
      };
      expect(workload.owner).toBe("alice");
      // The kernel ran as a scheduler job: accounting knows its job id.
      const jobId = workload.allocations[0]?.backendJobId ?? "";
      expect(jobId).toMatch(/^\d+$/);
      const sacct = Bun.spawnSync(["sacct", "-n", "-X", "-j", jobId, "-o", "JobID"], {
        env: { SLURM_CONF: cluster.slurmConf, PATH: cluster.path },
      });
      expect(sacct.stdout.toString().trim()).toBe(jobId);
    }, 420_000);
  },
);
