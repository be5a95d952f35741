/**
 * Multi-node BATCH on the REAL two-node cluster, through the built binary with the sandbox
 * on: a workload asking for tasks runs as that many tasks spread over the profile's nodes,
 * each in its own sandbox, each seeing the launcher's per-task variables (and nothing of the
 * login environment), the tasks of one node sharing a /tmp and /dev/shm that the other node's
 * tasks and other jobs never see, removed when the job ends. PMI works across the tasks: a
 * PMI-1 client (the wire protocol MPICH speaks to srun's pmi2 plugin) exchanges keys across
 * both nodes inside the sandbox, and an MPICH hello world reports size 2 and ranks 0 and 1.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { JOB_ENV, TASK_ENV } from "../../src/adapters/backend-slurm/backend.ts";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;
const TIMEOUT_MS = 240_000;

// `one` first: the isolation probe runs on the first profile that takes sessions.
const TOML = `[profiles.one]
description = "One node"
partition = "debug"
nodes = 1
cpus = 1
time_limit_minutes = 10
allow_sessions = true
allow_batch = true

[profiles.pair]
description = "Two nodes"
partition = "debug"
nodes = 2
cpus = 1
time_limit_minutes = 10
max_tasks = 4
mpi = "pmi2"
allow_batch = true
`;

/**
 * Each task: marks the node's /tmp and /dev/shm with its rank, waits until it sees as many
 * marks as its node has tasks, then prints one JSON line of what it saw.
 */
const TASK_PROGRAM = `
import json, os, time
rank = os.environ["SLURM_PROCID"]
open(f"/tmp/r{rank}", "w").close()
open(f"/dev/shm/r{rank}", "w").close()
per_node = int(os.environ["PER_NODE"])
deadline = time.time() + 30
while len([f for f in os.listdir("/tmp") if f.startswith("r")]) < per_node and time.time() < deadline:
    time.sleep(0.05)
time.sleep(0.5)
# One rank at a time: with the job's variables each line is several KiB, and lines the
# launcher forwards at once from four tasks were seen interleaved in the log.
time.sleep(0.4 * int(rank))
print(json.dumps({
    "env": dict(os.environ),
    "uid": os.getuid(),
    "tmp": sorted(f for f in os.listdir("/tmp") if f.startswith("r")),
    "shm": sorted(f for f in os.listdir("/dev/shm") if f.startswith("r")),
}), flush=True)
`;

/**
 * A PMI-1 client over the descriptor srun hands each task (PMI_FD): every rank puts its
 * node name, all meet at the barrier, then each reads every rank's key. Prints one line.
 */
const PMI_PROGRAM = `
import os, socket
s = socket.socket(fileno=int(os.environ["PMI_FD"]))
f = s.makefile("rw")
def call(line):
    f.write(line + "\\n"); f.flush()
    return dict(kv.split("=", 1) for kv in f.readline().split())
assert call("cmd=init pmi_version=1 pmi_subversion=1")["rc"] == "0"
rank, size = os.environ["PMI_RANK"], int(os.environ["PMI_SIZE"])
kvs = call("cmd=get_my_kvsname")["kvsname"]
assert call(f"cmd=put kvsname={kvs} key=node{rank} value={os.environ['SLURMD_NODENAME']}")["rc"] == "0"
call("cmd=barrier_in")
nodes = [call(f"cmd=get kvsname={kvs} key=node{r}")["value"] for r in range(size)]
call("cmd=finalize")
print(f"rank={rank} size={size} nodes={','.join(nodes)}", flush=True)
`;

/** An MPI hello world that also proves the ranks talk (a sum over all of them). */
const MPI_HELLO = `
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size, sum = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank=%d size=%d sum=%d\\n", rank, size, sum);
  MPI_Finalize();
  return 0;
}
`;

/** Both ranks printed their line, yet the job still runs: the hang in MPI_Finalize. */
function finalizeHang(phase: string, out: string): boolean {
  return phase === "RUNNING" && out.split("\n").filter((l) => l.startsWith("rank=")).length === 2;
}

/** MPICH's compiler wrapper (Debian's mpich); Open MPI here speaks PMIx only (see docs). */
const MPICC = "/usr/bin/mpicc.mpich";

describe.skipIf(testCluster === null || !IS_ROOT)("slurm-cluster multi-node BATCH", () => {
  const cluster = testCluster as TestCluster;
  let scratch: string;
  let d: Daemon;

  beforeAll(async () => {
    ensureBuilt();
    scratch = makeTempDir("o4s-multinode-");
    const config = join(scratch, "cluster.toml");
    writeFileSync(config, TOML);
    d = await startDaemon({
      args: ["--backend", "slurm", "--cluster-config", config],
      env: { SLURM_CONF: cluster.slurmConf, PATH: cluster.path },
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

  async function run(
    ...args: string[]
  ): Promise<{ id: string; phase: string; out: string; err: string }> {
    return runWaiting("180s", ...args);
  }

  async function runWaiting(
    timeout: string,
    ...args: string[]
  ): Promise<{ id: string; phase: string; out: string; err: string }> {
    const submitted = await d.cli("submit", "--profile", "pair", ...args);
    expect(submitted.stderr).toBe("");
    expect(submitted.code).toBe(0);
    const id = submitted.stdout.trim().split(/\s+/).at(-1) ?? "";
    await d.cli("wait", id, "--timeout", timeout);
    const view = await d.show(id);
    const logs = await d.cli("logs", id);
    const errors = await d.cli("logs", id, "--stderr");
    return { id, phase: view.phase, out: logs.stdout, err: errors.stdout };
  }

  test(
    "4 tasks on 2 nodes: each sandboxed with its rank, a /tmp shared per node only, removed after",
    async () => {
      const { phase, out, err } = await run(
        "--tasks",
        "4",
        "--tasks-per-node",
        "2",
        "--env",
        "PER_NODE=2",
        "--",
        "/usr/bin/python3",
        "-c",
        TASK_PROGRAM,
      );
      // The job's stderr in the diff when it did not complete: what the launcher said.
      expect({ phase, err: phase === "COMPLETED" ? "" : err }).toEqual({
        phase: "COMPLETED",
        err: "",
      });
      const tasks = out
        .trim()
        .split("\n")
        .map(
          (line) =>
            JSON.parse(line) as {
              env: Record<string, string>;
              uid: number;
              tmp: string[];
              shm: string[];
            },
        );
      expect(tasks).toHaveLength(4);
      const ranks = tasks.map((t) => t.env["SLURM_PROCID"]).sort();
      expect(ranks).toEqual(["0", "1", "2", "3"]);
      const allowed = new Set([...TASK_ENV, ...JOB_ENV, "PATH", "HOME", "LANG", "PER_NODE"]);
      allowed.add("OPENAI4S_DEADLINE");
      for (const t of tasks) {
        expect(t.uid).not.toBe(0);
        expect(t.env["SLURM_NTASKS"]).toBe("4");
        expect(t.env["SLURM_JOB_NODELIST"]).toBe("n[1-2]");
        expect(t.env["SLURM_CPUS_PER_TASK"]).toBe("1");
        expect(t.env["SLURM_JOB_ID"]).toMatch(/^[0-9]+$/);
        expect(t.env["SLURM_LOCALID"]).toMatch(/^[01]$/);
        // Nothing of the daemon's, the scheduler's config or a login: the allowlist only.
        expect(Object.keys(t.env).filter((k) => !allowed.has(k))).toEqual([]);
        // The node's tasks share /tmp and /dev/shm; the other node's marks are not there.
        const node = t.env["SLURM_NODEID"];
        const mates = tasks.filter((u) => u.env["SLURM_NODEID"] === node);
        const marks = mates.map((u) => `r${u.env["SLURM_PROCID"]}`).sort();
        expect(mates).toHaveLength(2);
        expect(t.tmp).toEqual(marks);
        expect(t.shm).toEqual(marks);
      }
      const jobId = tasks[0]?.env["SLURM_JOB_ID"];
      for (const node of ["0", "1"]) {
        expect(existsSync(`/run/openai4s-tasks/${jobId}.${node}`)).toBe(false);
      }
    },
    TIMEOUT_MS,
  );

  test(
    "PMI across both nodes inside the sandbox: 2 ranks exchange keys through srun's pmi2",
    async () => {
      const { phase, out, err } = await run(
        "--tasks",
        "2",
        "--",
        "/usr/bin/python3",
        "-c",
        PMI_PROGRAM,
      );
      // The job's stderr in the diff when it did not complete: what the launcher said.
      expect({ phase, err: phase === "COMPLETED" ? "" : err }).toEqual({
        phase: "COMPLETED",
        err: "",
      });
      expect(out.trim().split("\n").sort()).toEqual([
        "rank=0 size=2 nodes=n1,n2",
        "rank=1 size=2 nodes=n1,n2",
      ]);
    },
    TIMEOUT_MS,
  );

  test.skipIf(!existsSync(MPICC))(
    "MPI hello world across both nodes inside the sandbox: size 2, ranks 0 and 1",
    async () => {
      // Each task builds the program in its node's /tmp (one task per node here) and runs it.
      const hello = () =>
        runWaiting(
          "60s",
          "--tasks",
          "2",
          // The two "nodes" of the test cluster are one kernel: UCX would take them for one
          // host and pick its shared-memory transports, which cannot cross two nodes' private
          // /dev/shm and IPC namespaces. Between real nodes it picks the network by itself.
          // Set in the command, not in `env`: a comma in a job variable is refused on Slurm.
          "--",
          "/bin/sh",
          "-c",
          `printf %s "$0" > /tmp/hello.c && ${MPICC} -o /tmp/hello /tmp/hello.c && UCX_TLS=tcp,self exec /tmp/hello`,
          MPI_HELLO,
        );
      // UCX 1.13's TCP transport can hang MPI_Finalize (openucx/ucx#8738: a rank that closed
      // its endpoints waits in the PMI fence and stops progressing the connection its peer
      // still flushes): both ranks printed, one spins, the job never ends. Seen in 2 of 10
      // runs on a loaded 2-core machine, with the output complete each time. Such a run is
      // cancelled and the job run again, at most three times in all; anything else fails.
      let { id, phase, out, err } = await hello();
      for (let tries = 1; tries < 3 && finalizeHang(phase, out); tries++) {
        console.log(`MPI_Finalize hung in ${id} (UCX TCP, openucx/ucx#8738); running it again`);
        await d.cli("cancel", id);
        ({ id, phase, out, err } = await hello());
      }
      // A job still running holds both nodes for its time limit: freed before the verdict.
      if (phase === "RUNNING") await d.cli("cancel", id);
      // The job's stderr in the diff when it did not complete: what the launcher said.
      expect({ phase, err: phase === "COMPLETED" ? "" : err }).toEqual({
        phase: "COMPLETED",
        err: "",
      });
      expect(out.trim().split("\n").sort()).toEqual(["rank=0 size=2 sum=1", "rank=1 size=2 sum=1"]);
    },
    TIMEOUT_MS,
  );

  test(
    "a single-task BATCH on the same profile runs once, as before",
    async () => {
      const { phase, out, err } = await run("--", "/bin/sh", "-c", `echo "\${SLURM_PROCID-unset}"`);
      // The job's stderr in the diff when it did not complete: what the launcher said.
      expect({ phase, err: phase === "COMPLETED" ? "" : err }).toEqual({
        phase: "COMPLETED",
        err: "",
      });
      expect(out).toBe("unset\n");
    },
    TIMEOUT_MS,
  );

  test("more tasks than the profile allows is refused, naming the field", async () => {
    const r = await d.cli("submit", "--profile", "pair", "--tasks", "5", "--", "true");
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("tasks");
    expect(r.stderr).toContain("at most 4");
    // The bound is shown where scientists choose a profile.
    const profiles = await d.cli("profiles");
    expect(profiles.stdout).toMatch(/^pair\s+BATCH\s+2\s+4\s/m);
    expect(profiles.stdout).toMatch(/^one\s+SESSION,BATCH\s+1\s+1\s/m);
  });
});
