/**
 * Per-workload resources on the REAL cluster through the built binary (issue 35): a profile
 * states defaults and maxima in cluster.toml; `openai4s submit --cpus 2 --mem 300M --gpus 1
 * --time-limit 20` gets exactly those as its job's own figures in `scontrol show job`, one
 * that asks nothing gets the defaults, and one over a maximum is refused by the daemon naming
 * the field and the bound, with no job submitted. A session asking for CPUs and memory gets
 * them in its job too.
 * Seen failing with the options taken from the profile again: NumCPUs=1, MinMemoryNode=200M.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Daemon, ensureBuilt, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";
import { adminCommand, type TestCluster, testCluster } from "../support/slurm-cluster.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const IS_ROOT = process.getuid?.() === 0;
const TIMEOUT_MS = 180_000;

const TOML = `[profiles.small]
description = "One CPU by default, up to four"
partition = "debug"
cpus = 1
memory_mb = 200
time_limit_minutes = 10
max_cpus = 4
max_gpus = 2
max_memory_mb = 1000
max_time_limit_minutes = 30
allow_sessions = true
allow_batch = true
`;

describe.skipIf(testCluster === null || !IS_ROOT)("slurm-cluster per-workload resources", () => {
  const cluster = testCluster as TestCluster;
  let scratch: string;
  let d: Daemon;

  beforeAll(async () => {
    ensureBuilt();
    scratch = makeTempDir("o4s-resources-");
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

  /** Submits a sleeper with `flags`, waits until it runs, and returns its job's record. */
  async function runningJob(...flags: string[]): Promise<{ id: string; job: string }> {
    const submitted = await d.cli(
      "submit",
      "--profile",
      "small",
      ...flags,
      "--",
      "/bin/sleep",
      "300",
    );
    expect(submitted.stderr).toBe("");
    const id = submitted.stdout.trim().split(/\s+/).at(-1) ?? "";
    return { id, job: await jobOf(id) };
  }

  /** `scontrol show job` of the workload's job once it runs (a session's job runs its worker). */
  async function jobOf(id: string): Promise<string> {
    const jobId = await eventually(
      async () => {
        const view = await d.show(id);
        const handle = (view as unknown as { allocations: { backendJobId: string | null }[] })
          .allocations[0]?.backendJobId;
        return ["RUNNING", "READY"].includes(view.phase) && handle ? handle : null;
      },
      { what: `${id} RUNNING`, timeoutMs: 90_000 },
    );
    return adminCommand(cluster, "scontrol", "show", "job", String(jobId));
  }

  test(
    "--cpus 2 --mem 300M --gpus 1 --time-limit 20: the job's own figures",
    async () => {
      const { id, job } = await runningJob(
        "--cpus",
        "2",
        "--mem",
        "300M",
        "--gpus",
        "1",
        "--time-limit",
        "20",
      );
      console.log(
        job
          .split("\n")
          .filter((l) => /NumCPUs|TRES|MinMemory|TimeLimit|TresPerNode/.test(l))
          .join("\n"),
      );
      expect(job).toContain("NumCPUs=2");
      expect(job).toMatch(/MinMemoryNode=300M/);
      expect(job).toMatch(/TresPerNode=gres\/gpu:1|TresPerNode=gres:gpu:1/);
      expect(job).toContain("TimeLimit=00:20:00");
      expect((await d.cli("cancel", id)).code).toBe(0);
    },
    TIMEOUT_MS,
  );

  test(
    "a session asking --cpus 2 --mem 400M: its job's own figures too",
    async () => {
      const started = await d.cli(
        "session",
        "start",
        "--profile",
        "small",
        "--cpus",
        "2",
        "--mem",
        "400M",
      );
      expect(started.stderr).toBe("");
      const id = started.stdout.trim().split(/\s+/).at(-1) ?? "";
      const job = await jobOf(id);
      expect(job).toContain("NumCPUs=2");
      expect(job).toMatch(/MinMemoryNode=400M/);
      expect((await d.cli("cancel", id)).code).toBe(0);
    },
    TIMEOUT_MS,
  );

  test(
    "asking nothing: the profile's defaults",
    async () => {
      const { id, job } = await runningJob();
      expect(job).toContain("NumCPUs=1");
      expect(job).toMatch(/MinMemoryNode=200M/);
      expect(job).not.toMatch(/TresPerNode=gres/);
      expect(job).toContain("TimeLimit=00:10:00");
      expect((await d.cli("cancel", id)).code).toBe(0);
    },
    TIMEOUT_MS,
  );

  test(
    "over a maximum: refused naming the field and the bound; nothing submitted",
    async () => {
      const count = async () =>
        (JSON.parse((await d.cli("list", "--all", "--json")).stdout) as { items: unknown[] }).items
          .length;
      const before = await count();
      const r = await d.cli(
        "submit",
        "--profile",
        "small",
        "--cpus",
        "5",
        "--mem",
        "2G",
        "--",
        "/bin/true",
      );
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("resources.cpus");
      expect(r.stderr).toContain('profile "small" allows at most 4 CPUs per node (asked 5)');
      expect(r.stderr).toContain("resources.memoryMb");
      expect(r.stderr).toContain("allows at most 1000 MB of memory per node (asked 2048)");
      expect(await count()).toBe(before);
    },
    TIMEOUT_MS,
  );
});
