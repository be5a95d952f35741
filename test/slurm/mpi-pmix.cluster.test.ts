/**
 * Open MPI over PMIx across the REAL cluster's two nodes, inside the sandbox, through the
 * built binary: Debian's python3-mpi4py (built on Open MPI 4.1, which speaks PMIx only)
 * runs a hello world as 2 tasks launched by `srun --mpi=pmix`, and reports size 2 and
 * ranks 0 and 1.
 *
 * The daemon runs as a service account (not root), as operations.md recommends. PMIx
 * authenticates a task by the uid it claims over TCP against the job's owner: a root daemon
 * runs each job as a leased uid other than the submitting one, and srun's PMIx server then
 * closes the connection (measured: "OPAL ERROR: Unreachable" in MPI_Init). MPICH over
 * pmi2 (multinode.cluster.test.ts) has no such check: its descriptor is inherited.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;
const TIMEOUT_MS = 240_000;
/** The service account the daemon runs as (nobody: in /etc/passwd everywhere). */
const SERVICE_UID = 65534;

// `one` first: the isolation probe runs on the first profile that takes sessions.
const TOML = `[profiles.one]
description = "One node"
partition = "debug"
nodes = 1
cpus = 1
time_limit_minutes = 10
allow_sessions = true
allow_batch = true

[profiles.pmix]
description = "Two nodes, Open MPI over PMIx"
partition = "debug"
nodes = 2
cpus = 1
time_limit_minutes = 10
max_tasks = 2
mpi = "pmix"
allow_batch = true
`;

/** mpi4py's hello world, with a sum over the ranks to prove they talk. */
const MPI4PY_HELLO = `
from mpi4py import MPI
world = MPI.COMM_WORLD
total = world.allreduce(world.Get_rank())
print(f"rank={world.Get_rank()} size={world.Get_size()} sum={total}", flush=True)
`;

/**
 * Whether this machine can run it: mpi4py importable, srun's pmix plugin loaded, and each
 * simulated node its own TmpFS (scripts/slurm-test-cluster.sh writes `TmpFS=DIR/nodetmp/%n`;
 * a cluster started by an older script shares one and every 2-node PMIx step fails, which
 * says nothing about the daemon). Says why when it cannot.
 */
function pmixReady(cluster: TestCluster | null): boolean {
  if (cluster === null) return false;
  const run = (cmd: string[]) => {
    const r = Bun.spawnSync({
      cmd,
      env: { PATH: cluster.path, SLURM_CONF: cluster.slurmConf },
      stdout: "pipe",
      stderr: "pipe",
    });
    return { code: r.exitCode, out: `${r.stdout.toString()}${r.stderr.toString()}` };
  };
  const missing = [
    run(["/usr/bin/python3", "-c", "import mpi4py"]).code === 0 ? null : "python3-mpi4py",
    /\bpmix\b/.test(run(["srun", "--mpi=list"]).out) ? null : "srun's pmix plugin (libpmix-dev)",
    /^TmpFS\s*=.*%n/m.test(run(["scontrol", "show", "config"]).out)
      ? null
      : "a TmpFS per node (restart the test cluster with the current script)",
  ].filter((m) => m !== null);
  if (missing.length > 0) console.log(`Open MPI over PMIx skipped, missing: ${missing.join("; ")}`);
  return missing.length === 0;
}

describe.skipIf(!IS_ROOT || !pmixReady(testCluster))("slurm-cluster Open MPI over PMIx", () => {
  const cluster = testCluster as TestCluster;
  let scratch: string;
  let d: Daemon;

  beforeAll(async () => {
    ensureBuilt();
    scratch = makeTempDir("o4s-pmix-");
    chmodSync(scratch, 0o755);
    const config = join(scratch, "cluster.toml");
    writeFileSync(config, TOML, { mode: 0o644 });
    d = await startDaemon({
      args: ["--backend", "slurm", "--cluster-config", config],
      env: { SLURM_CONF: cluster.slurmConf, PATH: cluster.path, HOME: scratch },
      daemonUid: SERVICE_UID,
      startTimeoutMs: 120_000,
    });
    await eventually(async () => d.log().includes("session isolation verified on the nodes"), {
      what: "isolation verified on the nodes",
      timeoutMs: 120_000,
    });
  }, TIMEOUT_MS);

  afterAll(async () => {
    await d?.stop();
    if (scratch !== undefined) removeDir(scratch);
  });

  test(
    "mpi4py across both nodes inside the sandbox: size 2, ranks 0 and 1",
    async () => {
      const submitted = await d.cli(
        "submit",
        "--profile",
        "pmix",
        "--tasks",
        "2",
        "--",
        "/usr/bin/python3",
        "-c",
        MPI4PY_HELLO,
      );
      expect(submitted.stderr).toBe("");
      const id = submitted.stdout.trim().split(/\s+/).at(-1) ?? "";
      await d.cli("wait", id, "--timeout", "180s");
      const view = await d.show(id);
      const out = (await d.cli("logs", id)).stdout;
      const err = (await d.cli("logs", id, "--stderr")).stdout;
      // The job's stderr in the diff: what PMIx or the launcher said, if anything.
      expect({ phase: view.phase, err }).toEqual({ phase: "COMPLETED", err: "" });
      expect(out.trim().split("\n").sort()).toEqual(["rank=0 size=2 sum=1", "rank=1 size=2 sum=1"]);
    },
    TIMEOUT_MS,
  );
});
