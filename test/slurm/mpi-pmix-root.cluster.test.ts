/**
 * Open MPI over PMIx across the REAL cluster's two nodes with a ROOT daemon (issue 32), in
 * both of its modes, through the built binary: a uid leased per workload (`--uid-range`,
 * whose uids the site gave accounts) and `run_as = "owner"` (a principal's own account).
 * srun's PMIx server checks each task's uid against the job's owner: when root owned the job
 * and the tasks ran as a leased uid, MPI_Init failed with "OPAL ERROR: Unreachable". Now the
 * scheduler owns each job as the uid it runs as, and `sacct` shows that user.
 *
 * The test makes the lease range's accounts (uid = gid, as leases are) and an owner account,
 * and removes them after.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { createOwnerAccount, type OwnerAccount, run } from "../support/owner-account.ts";
import { type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;
const TIMEOUT_MS = 300_000;
/** A small lease range of its own, so no other suite's leases have accounts by accident. */
const FIRST_LEASE = 62_960;
/** The isolation probe holds a few leases of its own while it runs. */
const LEASES = 8;

const profile = (name: string, extra: string) => `[profiles.${name}]
description = "${name}"
partition = "debug"
nodes = 2
cpus = 1
time_limit_minutes = 10
max_tasks = 2
mpi = "pmix"
allow_batch = true
${extra}`;

// `one` first: the isolation probe runs on the first profile that takes sessions.
const TOML = `[profiles.one]
description = "One node"
partition = "debug"
nodes = 1
cpus = 1
time_limit_minutes = 10
allow_sessions = true
allow_batch = true

${profile("pmix", "")}
${profile("pmix-owner", 'run_as = "owner"\n')}`;

const MPI4PY_HELLO = `
from mpi4py import MPI
world = MPI.COMM_WORLD
total = world.allreduce(world.Get_rank())
print(f"rank={world.Get_rank()} size={world.Get_size()} sum={total}", flush=True)
`;

function pmixReady(cluster: TestCluster | null): boolean {
  if (cluster === null) return false;
  const out = (cmd: string[]) => {
    const r = Bun.spawnSync({
      cmd,
      env: { PATH: cluster.path, SLURM_CONF: cluster.slurmConf },
      stdout: "pipe",
      stderr: "pipe",
    });
    return { code: r.exitCode, text: `${r.stdout.toString()}${r.stderr.toString()}` };
  };
  return (
    out(["/usr/bin/python3", "-c", "import mpi4py"]).code === 0 &&
    /\bpmix\b/.test(out(["srun", "--mpi=list"]).text) &&
    /^TmpFS\s*=.*%n/m.test(out(["scontrol", "show", "config"]).text)
  );
}

const leaseName = (uid: number) => `o4slease${uid}`;

describe.skipIf(!IS_ROOT || !pmixReady(testCluster))("slurm-cluster Open MPI, root daemon", () => {
  const cluster = testCluster as TestCluster;
  const slurmEnv = { ...process.env, PATH: cluster?.path ?? "", SLURM_CONF: cluster?.slurmConf };
  let scratch: string;
  let d: Daemon;
  let owner: OwnerAccount;
  let base: string;
  const made: number[] = [];

  beforeAll(async () => {
    ensureBuilt();
    for (let uid = FIRST_LEASE; uid < FIRST_LEASE + LEASES; uid++) {
      Bun.spawnSync({ cmd: ["userdel", leaseName(uid)], stderr: "pipe" });
      Bun.spawnSync({ cmd: ["groupdel", leaseName(uid)], stderr: "pipe" });
      run(["groupadd", "-g", String(uid), leaseName(uid)]);
      run([
        "useradd",
        "-M",
        "-d",
        "/nonexistent",
        "-s",
        "/bin/sh",
        "-u",
        String(uid),
        "-g",
        String(uid),
        leaseName(uid),
      ]);
      made.push(uid);
    }
    owner = createOwnerAccount();
    scratch = makeTempDir("o4s-pmix-root-");
    chmodSync(scratch, 0o755);
    const config = join(scratch, "cluster.toml");
    writeFileSync(config, TOML, { mode: 0o644 });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    d = await startDaemon({
      args: [
        "--backend",
        "slurm",
        "--cluster-config",
        config,
        "--uid-range",
        `${FIRST_LEASE}-${FIRST_LEASE + LEASES - 1}`,
        "--listen",
        `127.0.0.1:${port}`,
      ],
      env: { SLURM_CONF: cluster.slurmConf, PATH: cluster.path, HOME: scratch },
      startTimeoutMs: 120_000,
    });
    // The jobs' own uids open their logs below the daemon's directory (made 0700).
    chmodSync(d.dir, 0o711);
    await eventually(async () => d.log().includes("session isolation verified on the nodes"), {
      what: "isolation verified on the nodes",
      timeoutMs: 120_000,
    });
  }, TIMEOUT_MS);

  afterAll(async () => {
    await d?.stop();
    owner?.remove();
    for (const uid of made) {
      Bun.spawnSync({ cmd: ["userdel", "-f", leaseName(uid)], stderr: "pipe" });
      Bun.spawnSync({ cmd: ["groupdel", leaseName(uid)], stderr: "pipe" });
    }
    if (scratch !== undefined) removeDir(scratch);
  });

  /**
   * Waits for the workload, then its phase, stdout, stderr and the job's sacct user: the
   * first of `users` that sacct names.
   */
  async function outcome(id: string, bearer: string, users: readonly string[]) {
    const get = async (path: string) =>
      fetch(`${base}${path}`, { headers: { authorization: `Bearer ${bearer}` } });
    const view = (await eventually(
      async () => {
        const w = (await (await get(`/v1/workloads/${id}`)).json()) as {
          phase: string;
          message: string | null;
          allocations: { backendJobId: string | null }[];
        };
        return ["COMPLETED", "FAILED", "CANCELLED", "LOST"].includes(w.phase) ? w : null;
      },
      { what: `${id} to end`, timeoutMs: 180_000, intervalMs: 250 },
    )) as {
      phase: string;
      message: string | null;
      allocations: { backendJobId: string | null }[];
    };
    const out = await (await get(`/v1/workloads/${id}/logs?stream=stdout`)).text();
    const err = await (await get(`/v1/workloads/${id}/logs?stream=stderr`)).text();
    const jobId = view.allocations.at(-1)?.backendJobId ?? "";
    if (view.phase !== "COMPLETED") {
      // What the daemon said, in the diff, rather than a missing log's 404.
      const log = await (await get(`/v1/workloads/${id}/logs?stream=stderr`)).text();
      return { phase: view.phase, err: `${view.message ?? ""}\n${log}`, ranks: [], user: "" };
    }
    // sacct lags: poll until the job's row names its owner. By uid: the User column is a
    // name the accounting resolved on its own. And its first row of a job submitted with
    // --uid can carry the submitter's uid (0) for a moment, although slurmd launched the job
    // as the lease's ("Launching batch job N for UID 62960") and MPI_Init, which checks the
    // job's owner, passed: seen here and in CI, the row says the owner's uid seconds later.
    const user = await eventually(
      () => {
        const r = Bun.spawnSync({
          cmd: ["sacct", "-n", "-P", "-X", "-j", jobId, "-o", "UID"],
          env: slurmEnv,
          stdout: "pipe",
        });
        const text = r.stdout.toString().trim();
        if (!users.includes(text)) throw new Error(`sacct names UID "${text}"`);
        return text;
      },
      { what: `sacct user of job ${jobId}`, timeoutMs: 30_000, intervalMs: 500 },
    );
    return { phase: view.phase, err, ranks: out.trim().split("\n").sort(), user };
  }

  const submit = async (bearer: string, profileName: string) => {
    const res = await fetch(`${base}/v1/workloads`, {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      body: JSON.stringify({
        kind: "BATCH",
        profile: profileName,
        tasks: 2,
        command: ["/usr/bin/python3", "-c", MPI4PY_HELLO],
      }),
    });
    expect(res.status).toBe(201);
    return String(((await res.json()) as { id: string }).id);
  };

  const RANKS = ["rank=0 size=2 sum=1", "rank=1 size=2 sum=1"];

  test(
    "a leased uid: mpi4py across both nodes passes, and sacct shows the lease's account",
    async () => {
      const admin = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
      const id = await submit(admin, "pmix");
      const got = await outcome(id, admin, made.map(String));
      expect({ phase: got.phase, err: got.err }).toEqual({ phase: "COMPLETED", err: "" });
      expect(got.ranks).toEqual(RANKS);
      expect(made.map(String)).toContain(got.user);
    },
    TIMEOUT_MS,
  );

  test(
    'run_as = "owner": mpi4py across both nodes passes, and sacct shows the principal\'s account',
    async () => {
      expect((await d.cli("principal", "add", "sci", "--unix-user", owner.user)).code).toBe(0);
      const issued = await d.cli("token", "issue", "sci");
      expect(issued.code).toBe(0);
      const token = issued.stdout.trim().split(/\s+/).at(-1) ?? "";
      const id = await submit(token, "pmix-owner");
      const got = await outcome(id, token, [String(owner.uid)]);
      expect({ phase: got.phase, err: got.err }).toEqual({ phase: "COMPLETED", err: "" });
      expect(got.ranks).toEqual(RANKS);
      expect(got.user).toBe(String(owner.uid));
    },
    TIMEOUT_MS,
  );
});
