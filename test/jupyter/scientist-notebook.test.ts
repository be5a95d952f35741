/**
 * The scientist's notebook (test/fixtures/scientist.ipynb) run by nbclient directly against
 * the built daemon, as a principal (issue 30): no Jupyter Server in between, the kernel
 * started and spoken to through /api/kernels and its websocket, the input uploaded and the
 * outputs downloaded through /api/contents. numpy and pandas, a PNG, a process pool, 10 MB
 * printed (whole in the file the truncation line names), a 90 s cell.
 *
 * It runs on the local backend, and on the REAL Slurm dev cluster when one is up
 * (OPENAI4S_SLURM_TEST_DIR; the kernel a scheduler job on a node), both in ONE test at the
 * same time: the 90 s cell is a sleep, so two runs side by side take the time of one, where
 * two tests in turn added over three minutes to a CI run that has 30.
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
if (missing !== null) console.log(`skipping the scientist's notebook: ${missing}`);

interface Door {
  readonly daemon: Daemon;
  readonly url: string;
  readonly token: string;
}

/** A daemon listening on TCP with alice as a principal, and her token. */
async function openDoor(args: readonly string[], env: Record<string, string>): Promise<Door> {
  const port = await freePort();
  const daemon = await startDaemon({
    args: [...args, "--listen", `127.0.0.1:${port}`],
    env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}:/usr/sbin:/sbin`, ...env },
    startTimeoutMs: 120_000,
  });
  expect((await daemon.cli("principal", "add", "alice")).code).toBe(0);
  const token = (await daemon.cli("token", "issue", "alice")).stdout.trim();
  return { daemon, url: `http://127.0.0.1:${port}`, token };
}

/** The Slurm daemon, once the nodes' isolation is verified (sessions wait for it). */
async function openSlurmDoor(cluster: TestCluster, scratch: string): Promise<Door> {
  const config = join(scratch, "cluster.toml");
  writeFileSync(config, CLUSTER_TOML);
  const door = await openDoor(["--backend", "slurm", "--cluster-config", config], {
    SLURM_CONF: cluster.slurmConf,
  });
  await eventually(
    async () => door.daemon.log().includes("session isolation verified on the nodes"),
    { what: "session isolation verified on the nodes", timeoutMs: 120_000 },
  );
  return door;
}

/** Runs the notebook as alice and checks the session was hers; returns its workload. */
async function runAsAlice(door: Door, kernel: string, dir: string, label: string) {
  const run = await runScientistNotebook({ url: door.url, token: door.token, kernel, dir });
  console.log(`${label}: the scientist's notebook ran in ${(run.wallMs / 1000).toFixed(1)} s`);
  const workload = (await door.daemon.show(run.directory)) as unknown as {
    owner: string | null;
    allocations: readonly { readonly backendJobId: string | null }[];
  };
  expect(workload.owner).toBe("alice");
  return workload;
}

describe.skipIf(missing !== null)("the scientist's notebook through nbclient", () => {
  let local: Door | undefined;
  let slurm: Door | undefined;
  let scratch: string | undefined;

  beforeAll(async () => {
    ensureBuilt();
    local = await openDoor([], {});
    if (testCluster !== null) {
      scratch = makeTempDir("o4s-slurm-notebook-");
      slurm = await openSlurmDoor(testCluster, scratch);
    }
  }, 300_000);

  afterAll(async () => {
    await local?.daemon.stop();
    if (slurm !== undefined) {
      // Leave nothing running on the shared cluster: cancel this daemon's workloads first.
      const listed = await slurm.daemon.cli("list", "--json");
      const items = (JSON.parse(listed.stdout || '{"items":[]}') as { items: { id: string }[] })
        .items;
      for (const w of items) await slurm.daemon.cli("cancel", w.id);
      await slurm.daemon.stop();
    }
    if (scratch !== undefined) removeDir(scratch);
  }, 120_000);

  test(`runs end to end as alice, locally${testCluster === null ? "" : " and as a Slurm job, side by side"}`, async () => {
    const onLocal = runAsAlice(local as Door, "default", (local as Door).daemon.dir, "local");
    const onSlurm =
      slurm === undefined || scratch === undefined
        ? Promise.resolve(null)
        : runAsAlice(slurm, "lab", scratch, "slurm");
    const [, slurmWorkload] = await Promise.all([onLocal, onSlurm]);
    if (slurmWorkload === null || testCluster === null) return;
    // The kernel ran as a scheduler job: accounting knows its job id.
    const jobId = slurmWorkload.allocations[0]?.backendJobId ?? "";
    expect(jobId).toMatch(/^\d+$/);
    const sacct = Bun.spawnSync(["sacct", "-n", "-X", "-j", jobId, "-o", "JobID"], {
      env: { SLURM_CONF: testCluster.slurmConf, PATH: testCluster.path },
    });
    expect(sacct.stdout.toString().trim()).toBe(jobId);
  }, 420_000);
});
