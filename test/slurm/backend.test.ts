/**
 * The backend on top of the REAL broker and parsers, with a fake cluster underneath for what a
 * real cluster cannot produce on demand (timeouts, garbage, a missing binary, a lost answer,
 * accounting lag, a purged job). The real-cluster behaviour is in *.cluster.test.ts.
 */
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { createSlurmBackend, type SlurmBackend } from "../../src/adapters/backend-slurm/backend.ts";
import { createSlurmBroker } from "../../src/adapters/backend-slurm/broker.ts";
import type {
  AllocationObservation,
  SubmitResult,
} from "../../src/core/ports/allocation-backend.ts";
import { type ManualClock, manualClock } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { type FakeCluster, fakeCluster } from "../support/fake-slurm-cluster.ts";
import { BASE_PLACEMENT, catalog, command, request, target } from "../support/slurm-fixtures.ts";
import { makeTempDir, removeDir } from "../support/temp-dir.ts";

const dir = makeTempDir("o4s-slurm-unit-");
afterAll(() => removeDir(dir));

let cluster: FakeCluster;
let clock: ManualClock;
let log: ReturnType<typeof memoryLog>;
let backend: SlurmBackend;

beforeEach(() => {
  cluster = fakeCluster();
  clock = manualClock();
  log = memoryLog();
  backend = createSlurmBackend({
    broker: createSlurmBroker({ runner: cluster, path: "/usr/bin:/bin" }),
    placements: catalog({
      cpu: BASE_PLACEMENT,
      pair: { ...BASE_PLACEMENT, nodes: 2, gpus: 1, qos: "normal", account: "lab" },
      roomy: {
        ...BASE_PLACEMENT,
        maxima: { cpus: 4, memoryMb: 1000, gpus: 2, timeLimitSeconds: 3600 },
      },
    }),
    clock,
    log,
    lostGraceMs: 30_000,
    lostMinObservations: 3,
  });
});

function created(result: SubmitResult | undefined): string {
  if (result?.kind !== "Created")
    throw new Error(`expected Created, got ${JSON.stringify(result)}`);
  return result.handle;
}

async function observeOne(
  req: ReturnType<typeof request>,
  handle: string,
): Promise<AllocationObservation> {
  const result = await backend.observe([target(req, handle)]);
  if (result.kind !== "Observed")
    throw new Error(`expected Observed, got ${JSON.stringify(result)}`);
  const observation = result.observations.get(req.allocationId);
  if (!observation) throw new Error("no observation for the target");
  return observation;
}

describe("submit", () => {
  test("one token lookup (one squeue, one sacct) for 100 submissions, then one sbatch each", async () => {
    const reqs = Array.from({ length: 100 }, () => request(dir, command(["/bin/true"])));
    const results = await backend.submit(reqs);
    expect(results.size).toBe(100);
    for (const r of reqs) created(results.get(r.token));
    expect(cluster.count("squeue")).toBe(1);
    expect(cluster.count("sacct")).toBe(1);
    expect(cluster.count("sbatch")).toBe(100);
    const diag = await backend.diagnostics();
    expect(diag.calls).toEqual({
      sbatch: 100,
      squeue: 1,
      sacct: 1,
      scancel: 0,
      srun: 0,
      scontrol: 0,
    });
  });

  test("fresh tokens skip the lookup; any other token in the same call is still looked up", async () => {
    const fresh = { ...request(dir, command(["/bin/true"])), freshToken: true as const };
    const results = await backend.submit([fresh]);
    created(results.get(fresh.token));
    expect(cluster.count("squeue")).toBe(0);
    expect(cluster.count("sacct")).toBe(0);
    expect(cluster.count("sbatch")).toBe(1);

    const retry = request(dir, command(["/bin/true"]));
    const another = { ...request(dir, command(["/bin/true"])), freshToken: true as const };
    const both = await backend.submit([retry, another]);
    created(both.get(retry.token));
    created(both.get(another.token));
    expect(cluster.count("squeue")).toBe(1);
    expect(cluster.count("sbatch")).toBe(3);
  });

  test("the job carries the token as name and comment, an --export=ALL of exactly the documented environment, no requeue", async () => {
    const req = request(
      dir,
      command(["/bin/echo", "it's $HOME", "a\n#SBATCH --export=ALL"], { MODE: "x y" }),
    );
    const handle = created((await backend.submit([req])).get(req.token));
    const job = cluster.jobs.get(handle);
    expect(job?.name).toBe(req.token);
    expect(job?.comment).toBe(req.token);
    const args = job?.argv ?? [];
    expect(args).toContain(`--job-name=${req.token}`);
    expect(args).toContain(`--comment=${req.token}`);
    expect(args).toContain("--no-requeue");
    expect(args).toContain("--partition=debug");
    expect(args).toContain(`--chdir=${req.workspaceDir}`);
    expect(args).toContain(`--output=${req.allocationDir}/stdout.log`);
    expect(args).toContain("--time=10");
    // The bare word ALL (any list would run the account's login shell), and sbatch's own
    // environment is exactly the documented one: nothing of this test process reaches it.
    expect(args.filter((a) => a.startsWith("--export="))).toEqual(["--export=ALL"]);
    expect(job?.env).toEqual({
      PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      HOME: userInfo().homedir,
      LANG: "C.UTF-8",
      MODE: "x y",
    });
    const script = readFileSync(join(req.allocationDir, "job.sh"), "utf8");
    expect(script).toContain(`exec '/bin/echo' 'it'\\''s $HOME' 'a\n#SBATCH --export=ALL'`);
  });

  test("the batch script is never written through a link planted as its name", async () => {
    const req = request(dir, command(["/bin/true"]));
    mkdirSync(req.allocationDir, { recursive: true });
    const victim = join(dir, "victim.txt");
    writeFileSync(victim, "untouched");
    // An owner's allocation directory is the owner's: they could plant this before submit.
    symlinkSync(victim, join(req.allocationDir, "job.sh"));
    const result = (await backend.submit([req])).get(req.token);
    expect(result?.kind).not.toBe("Created");
    expect(readFileSync(victim, "utf8")).toBe("untouched");
    expect(cluster.jobs.size).toBe(0);
  });

  test("the profile's time limit is a ceiling, counted in whole minutes rounded up", async () => {
    const minutes = async (timeLimitSeconds: number | null) => {
      const req = request(dir, command(["/bin/true"]), { timeLimitSeconds });
      const handle = created((await backend.submit([req])).get(req.token));
      return cluster.jobs.get(handle)?.argv.find((a) => a.startsWith("--time="));
    };
    expect(await minutes(null)).toBe("--time=10");
    expect(await minutes(3600)).toBe("--time=10");
    expect(await minutes(61)).toBe("--time=2");
    expect(await minutes(1)).toBe("--time=1");
  });

  test("asked resources become the job's own options, the profile's defaults the rest; the maximum caps the time", async () => {
    const options = async (overrides: Parameters<typeof request>[2]) => {
      const req = request(dir, command(["/bin/true"]), { profile: "roomy", ...overrides });
      const handle = created((await backend.submit([req])).get(req.token));
      return cluster.jobs
        .get(handle)
        ?.argv.filter((a) => /^--(cpus-per-task|mem|gres|time)=/.test(a));
    };
    expect(await options({})).toEqual(["--cpus-per-task=1", "--mem=100M", "--time=10"]);
    expect(
      await options({ resources: { cpus: 2, memoryMb: 300, gpus: 1 }, timeLimitSeconds: 1800 }),
    ).toEqual(["--cpus-per-task=2", "--gres=gpu:1", "--mem=300M", "--time=30"]);
    expect(await options({ resources: { memoryMb: 300 }, timeLimitSeconds: 7200 })).toEqual([
      "--cpus-per-task=1",
      "--mem=300M",
      "--time=60",
    ]);
  });

  test("a request over a maximum that got past admission is Rejected for itself, never run", async () => {
    const req = request(dir, command(["/bin/true"]), { resources: { cpus: 2 } });
    const result = (await backend.submit([req])).get(req.token);
    expect(result).toMatchObject({
      kind: "Rejected",
      byRequest: true,
      message: 'resources.cpus: profile "cpu" allows at most 1 CPU per node (asked 2)',
    });
    expect(cluster.jobs.size).toBe(0);
  });

  test("a WORKER launch starts one task per rank, naming only the rank variable", async () => {
    const req = request(
      dir,
      {
        kind: "WORKER",
        workerCommand: ["/opt/openai4s-worker", "--credential-dir", "/state/creds"],
        credentialDir: "/state/creds",
        ranks: 2,
        env: {},
      },
      { profile: "pair" },
    );
    const handle = created((await backend.submit([req])).get(req.token));
    const args = cluster.jobs.get(handle)?.argv ?? [];
    expect(args).toContain("--nodes=2");
    expect(args).toContain("--gres=gpu:1");
    expect(args).toContain("--qos=normal");
    expect(args).toContain("--account=lab");
    const script = readFileSync(join(req.allocationDir, "job.sh"), "utf8");
    expect(script).toContain(
      "exec 'srun' '--export=ALL' '--nodes=2' '--ntasks=2' '--ntasks-per-node=1' '--kill-on-bad-exit=1' '/opt/openai4s-worker' '--credential-dir' '/state/creds' '--rank-env' 'SLURM_PROCID' '--node-env' 'SLURMD_NODENAME'",
    );
  });

  test("a token already in the queue is Existing, and nothing is submitted", async () => {
    const req = request(dir, command(["/bin/true"]));
    const handle = created((await backend.submit([req])).get(req.token));
    const again = await backend.submit([req]);
    expect(again.get(req.token)).toEqual({
      kind: "Existing",
      token: req.token,
      handle: handle as never,
    });
    expect(cluster.count("sbatch")).toBe(1);
    // Found in the queue: accounting was not asked the second time.
    expect(cluster.count("sacct")).toBe(1);
  });

  test("a token only accounting still knows, by JobName (no stored comment), is Existing", async () => {
    const req = request(dir, command(["/bin/true"]));
    const handle = created((await backend.submit([req])).get(req.token));
    cluster.setState(handle, "COMPLETED");
    cluster.syncAccounting({ storeComments: false });
    cluster.purge(handle);
    const again = await backend.submit([req]);
    expect(again.get(req.token)?.kind).toBe("Existing");
    expect(cluster.count("sbatch")).toBe(1);
  });

  for (const [what, program, fault] of [
    ["squeue unreachable", "squeue", { kind: "unreachable" }],
    ["squeue timed out", "squeue", { kind: "timeout" }],
    ["squeue missing from PATH", "squeue", { kind: "notfound" }],
    ["squeue garbage", "squeue", { kind: "garbage", stdout: "<html>502 Bad Gateway</html>\n" }],
    ["sacct unreachable", "sacct", { kind: "unreachable" }],
    ["sacct timed out", "sacct", { kind: "timeout" }],
    ["sacct garbage", "sacct", { kind: "garbage", stdout: "12|x\n" }],
  ] as const) {
    test(`when the lookup cannot be answered (${what}) submit is Unknown and submits nothing`, async () => {
      cluster.inject(program, fault);
      const req = request(dir, command(["/bin/true"]));
      const result = (await backend.submit([req])).get(req.token);
      expect(result?.kind).toBe("Unknown");
      expect(result?.token).toBe(req.token);
      expect(cluster.count("sbatch")).toBe(0);
    });
  }

  test("a lost sbatch answer is Unknown; findByToken then resolves it to the one job", async () => {
    cluster.inject("sbatch", { kind: "lose-answer" });
    const req = request(dir, command(["/bin/true"]));
    expect((await backend.submit([req])).get(req.token)?.kind).toBe("Unknown");
    expect(cluster.jobs.size).toBe(1);
    const [jobId] = [...cluster.jobs.keys()];
    const found = (await backend.findByToken([req.token])).get(req.token);
    expect(found?.kind).toBe("Found");
    if (found?.kind === "Found") expect(String(found.handle)).toBe(String(jobId));
    const retry = (await backend.submit([req])).get(req.token);
    expect(retry?.kind).toBe("Existing");
    expect(cluster.jobs.size).toBe(1);
  });

  for (const [what, fault, kind] of [
    [
      "a refusal",
      {
        kind: "refuse",
        stderr: "sbatch: error: Batch job submission failed: Invalid partition name specified\n",
      },
      "Rejected",
    ],
    [
      "a submission whose reply timed out",
      {
        kind: "refuse",
        stderr:
          "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n",
      },
      "Unknown",
    ],
    [
      "garbage instead of a job id",
      { kind: "garbage", stdout: "Submitted batch job\n" },
      "Unknown",
    ],
    ["a timeout", { kind: "timeout" }, "Unknown"],
    ["sbatch missing from PATH", { kind: "notfound" }, "Unknown"],
  ] as const) {
    test(`sbatch ${what} → ${kind}`, async () => {
      cluster.inject("sbatch", fault);
      const req = request(dir, command(["/bin/true"]));
      expect((await backend.submit([req])).get(req.token)?.kind).toBe(kind);
    });
  }

  test("a refusal is logged at warn with the scheduler's own words and the profile", async () => {
    cluster.inject("sbatch", {
      kind: "refuse",
      stderr: "sbatch: error: Batch job submission failed: Invalid partition name specified\n",
    });
    const req = request(dir, command(["/bin/true"]));
    await backend.submit([req]);
    const warned = log.lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter(
        (l) => l["level"] === "warn" && l["message"] === "the scheduler refused a submission",
      );
    expect(warned).toHaveLength(1);
    expect(warned[0]?.["profile"]).toBe(req.profile);
    expect(String(warned[0]?.["said"])).toContain("Invalid partition name specified");
  });

  test("the scheduler refusing figures a workload asked for is that request's refusal, not the profile's", async () => {
    const refuse = () =>
      cluster.inject("sbatch", {
        kind: "refuse",
        stderr:
          "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
      });
    refuse();
    const asked = request(dir, command(["/bin/true"]), {
      profile: "roomy",
      resources: { gpus: 2 },
    });
    expect((await backend.submit([asked])).get(asked.token)).toMatchObject({
      kind: "Rejected",
      byRequest: true,
    });
    // The profile's own figures refused: the profile's, as before (its breaker counts it).
    refuse();
    const plain = request(dir, command(["/bin/true"]), { profile: "roomy" });
    const result = (await backend.submit([plain])).get(plain.token);
    expect(result?.kind).toBe("Rejected");
    expect(result && "byRequest" in result).toBe(false);
  });

  for (const [what, env] of [
    ["a credential-shaped name", { API_TOKEN: "x" }],
    ["a comma in a value", { X: "1,ALL" }],
    ["a newline in a value", { X: "1\nALL" }],
    ["a value reading as NONE", { X: " none " }],
    ["a quote in a value", { X: "it's" }],
    ["a scheduler variable", { SLURM_NTASKS: "64" }],
  ] as const) {
    test(`${what} is Rejected before any sbatch call`, async () => {
      const req = request(dir, command(["/bin/true"], env));
      const result = (await backend.submit([req])).get(req.token);
      expect(result?.kind).toBe("Rejected");
      expect(cluster.count("sbatch")).toBe(0);
    });
  }

  test("an unknown profile is Rejected", async () => {
    const req = request(dir, command(["/bin/true"]), { profile: "nope" });
    expect((await backend.submit([req])).get(req.token)?.kind).toBe("Rejected");
    expect(cluster.count("sbatch")).toBe(0);
  });
});

describe("observe", () => {
  async function submitted(n: number) {
    const reqs = Array.from({ length: n }, () => request(dir, command(["/bin/true"])));
    const results = await backend.submit(reqs);
    return reqs.map((r) => ({ req: r, handle: created(results.get(r.token)) }));
  }

  test("one squeue for every target; sacct only for those that left the queue, in one call", async () => {
    const jobs = await submitted(100);
    const before = { squeue: cluster.count("squeue"), sacct: cluster.count("sacct") };
    const all = jobs.map((j) => target(j.req, j.handle));
    const first = await backend.observe(all);
    expect(first.kind).toBe("Observed");
    expect(cluster.count("squeue") - before.squeue).toBe(1);
    expect(cluster.count("sacct") - before.sacct).toBe(0);

    for (const j of jobs.slice(0, 7)) {
      cluster.setState(j.handle, "COMPLETED");
    }
    cluster.syncAccounting();
    for (const j of jobs.slice(0, 7)) cluster.purge(j.handle);
    const second = await backend.observe(all);
    expect(cluster.count("squeue") - before.squeue).toBe(2);
    expect(cluster.count("sacct") - before.sacct).toBe(1);
    const sacctCall = cluster.calls.filter((c) => c.program === "sacct").at(-1);
    expect(sacctCall?.args).toContain(
      `--jobs=${jobs
        .slice(0, 7)
        .map((j) => j.handle)
        .join(",")}`,
    );
    if (second.kind !== "Observed") throw new Error("expected Observed");
    for (const j of jobs.slice(0, 7)) {
      expect(second.observations.get(j.req.allocationId)).toMatchObject({
        phase: "COMPLETED",
        exitCode: 0,
      });
    }
    for (const j of jobs.slice(7)) {
      expect(second.observations.get(j.req.allocationId)).toMatchObject({ phase: "QUEUED" });
    }
  });

  test("states and exit statuses map through the table", async () => {
    const cases = [
      ["RUNNING", 0, { phase: "RUNNING", reason: null }],
      ["COMPLETING", 0, { phase: "RUNNING" }],
      ["SUSPENDED", 0, { phase: "RUNNING", reason: "SUSPENDED" }],
      ["COMPLETED", 0, { phase: "COMPLETED", reason: "EXITED_ZERO", exitCode: 0 }],
      ["FAILED", 3 << 8, { phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 }],
      ["FAILED", 9, { phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 137 }, "1M"],
      ["FAILED", 9, { phase: "FAILED", reason: "OUT_OF_MEMORY", exitCode: 137 }, "60M"],
      [
        "TIMEOUT",
        0,
        {
          phase: "FAILED",
          reason: "TIME_LIMIT_EXCEEDED",
          message: "TIME_LIMIT_EXCEEDED: ran 0:01:04 of 0:01:00: raise timeLimitSeconds",
        },
      ],
      [
        "OUT_OF_MEMORY",
        0,
        {
          phase: "FAILED",
          reason: "OUT_OF_MEMORY",
          // The catalog's "cpu" profile has 100 MB per node: more than the 60 MiB it needed.
          message:
            "OUT_OF_MEMORY: used 60 MiB of the 50 MiB asked for: ask for more memory (profile with more memory: cpu)",
        },
        "60M",
      ],
      ["NODE_FAIL", 0, { phase: "FAILED", reason: "NODE_FAILURE" }],
      ["PREEMPTED", 0, { phase: "FAILED", reason: "PREEMPTED" }],
      ["CANCELLED", 15, { phase: "CANCELLED" }],
      ["REQUEUED", 0, { phase: "QUEUED", reason: "REQUEUED" }],
    ] as const;
    const jobs = await submitted(cases.length);
    cases.forEach(([state, status, , maxRss], i) => {
      const handle = jobs[i]?.handle ?? "";
      cluster.setState(handle, state, status);
      const job = cluster.jobs.get(handle);
      // A SIGKILLed job whose memory reached its request was killed for memory (end-hints.ts).
      if (job !== undefined) {
        job.usage = { reqMem: "50M", maxRss: maxRss ?? "", elapsedRaw: "64", timelimitRaw: "1" };
      }
    });
    const result = await backend.observe(jobs.map((j) => target(j.req, j.handle)));
    if (result.kind !== "Observed") throw new Error("expected Observed");
    cases.forEach(([, , expected], i) => {
      expect(result.observations.get(jobs[i]?.req.allocationId ?? "")).toMatchObject({
        kind: "Observed",
        ...expected,
      });
    });
  });

  test("a SIGKILLed job waits (bounded) for accounting's memory figures before it is settled", async () => {
    const [j] = await submitted(1);
    if (!j) throw new Error("no job");
    cluster.setState(j.handle, "FAILED", 9);
    const endedAt = cluster.jobs.get(j.handle)?.endedAt ?? 0;
    if (clock.now() < endedAt + 5_000) clock.advance(endedAt + 5_000 - clock.now());
    const t = target(j.req, j.handle);
    const early = await backend.observe([t]);
    expect(early.kind === "Observed" && early.observations.get(j.req.allocationId)?.kind).toBe(
      "Indeterminate",
    );
    clock.advance(60_000);
    const late = await backend.observe([t]);
    expect(late.kind === "Observed" && late.observations.get(j.req.allocationId)).toMatchObject({
      kind: "Observed",
      phase: "FAILED",
      reason: "NONZERO_EXIT",
      exitCode: 137,
    });
  });

  for (const [what, fault] of [
    ["unreachable", { kind: "unreachable" }],
    ["timed out", { kind: "timeout" }],
    ["missing from PATH", { kind: "notfound" }],
    ["answering garbage", { kind: "garbage", stdout: "JOBID PARTITION NAME\n  12 debug x\n" }],
  ] as const) {
    test(`squeue ${what} → Unavailable, never "no such job"`, async () => {
      const [j] = await submitted(1);
      if (!j) throw new Error("no job");
      cluster.persist("squeue", fault);
      for (let tick = 0; tick < 5; tick++) {
        clock.advance(60_000);
        const result = await backend.observe([target(j.req, j.handle)]);
        expect(result.kind).toBe("Unavailable");
      }
      expect((await backend.diagnostics()).healthy).toBe(false);
    });
  }

  test("LOST only after absence from both, over several observations AND the grace period", async () => {
    const [j] = await submitted(1);
    if (!j) throw new Error("no job");
    cluster.purge(j.handle);
    const seen: string[] = [];
    for (let tick = 0; tick < 3; tick++) {
      const o = await observeOne(j.req, j.handle);
      seen.push(o.kind === "Observed" ? o.phase : o.kind);
      clock.advance(1_000);
    }
    // Three empty answers in three seconds: accounting may just be lagging.
    expect(seen).toEqual(["Indeterminate", "Indeterminate", "Indeterminate"]);
    clock.advance(30_000);
    const o = await observeOne(j.req, j.handle);
    expect(o).toMatchObject({ kind: "Observed", phase: "LOST", reason: "NOT_FOUND_BY_BACKEND" });
  });

  test("accounting catching up before the grace period ends the story: never LOST", async () => {
    const [j] = await submitted(1);
    if (!j) throw new Error("no job");
    cluster.setState(j.handle, "FAILED", 2 << 8);
    cluster.purge(j.handle);
    for (let tick = 0; tick < 3; tick++) {
      expect((await observeOne(j.req, j.handle)).kind).toBe("Indeterminate");
      clock.advance(5_000);
    }
    cluster.accounting.set(j.handle, {
      name: j.req.token,
      comment: "",
      state: "FAILED",
      exit: "2:0",
    });
    clock.advance(60_000);
    expect(await observeOne(j.req, j.handle)).toMatchObject({ phase: "FAILED", exitCode: 2 });
  });

  test("accounting that cannot answer is no evidence: never LOST however long", async () => {
    const [j] = await submitted(1);
    if (!j) throw new Error("no job");
    cluster.purge(j.handle);
    cluster.persist("sacct", { kind: "unreachable" });
    for (let tick = 0; tick < 10; tick++) {
      clock.advance(60_000);
      expect((await observeOne(j.req, j.handle)).kind).toBe("Indeterminate");
    }
  });

  test("a record still named 'allocation' in accounting is lag, not absence", async () => {
    const [j] = await submitted(1);
    if (!j) throw new Error("no job");
    cluster.purge(j.handle);
    cluster.accounting.set(j.handle, {
      name: "allocation",
      comment: "",
      state: "RUNNING",
      exit: "0:0",
    });
    for (let tick = 0; tick < 6; tick++) {
      clock.advance(60_000);
      const o = await observeOne(j.req, j.handle);
      expect(o.kind).toBe("Indeterminate");
    }
  });

  test("gone from the controller while accounting still says RUNNING: LOST only after the grace", async () => {
    const [j] = await submitted(1);
    if (!j) throw new Error("no job");
    cluster.setState(j.handle, "RUNNING");
    cluster.syncAccounting();
    cluster.purge(j.handle);
    expect((await observeOne(j.req, j.handle)).kind).toBe("Indeterminate");
    clock.advance(10_000);
    expect((await observeOne(j.req, j.handle)).kind).toBe("Indeterminate");
    clock.advance(30_000);
    expect(await observeOne(j.req, j.handle)).toMatchObject({ phase: "LOST" });
  });

  test("an unrecognised state is Indeterminate and logged, never COMPLETED", async () => {
    const [j] = await submitted(1);
    if (!j) throw new Error("no job");
    cluster.setState(j.handle, "WARP_DRIVE");
    const o = await observeOne(j.req, j.handle);
    expect(o.kind).toBe("Indeterminate");
    expect(log.lines.some((l) => l.includes("unrecognised job state"))).toBe(true);
  });
});

describe("cancel", () => {
  test("one scancel for every target", async () => {
    const reqs = Array.from({ length: 5 }, () => request(dir, command(["/bin/sleep", "60"])));
    const results = await backend.submit(reqs);
    const targets = reqs.map((r) => target(r, created(results.get(r.token))));
    const cancelled = await backend.cancel(targets);
    expect(cluster.count("scancel")).toBe(1);
    for (const r of reqs) expect(cancelled.get(r.allocationId)).toEqual({ kind: "Requested" });
  });

  test("an unreachable controller is Unavailable, not Requested", async () => {
    const req = request(dir, command(["/bin/sleep", "60"]));
    const handle = created((await backend.submit([req])).get(req.token));
    cluster.inject("scancel", { kind: "unreachable" });
    const cancelled = await backend.cancel([target(req, handle)]);
    expect(cancelled.get(req.allocationId)?.kind).toBe("Unavailable");
  });

  test("a refusal other than 'already gone' is not a cancelled job", async () => {
    const req = request(dir, command(["/bin/sleep", "60"]));
    const handle = created((await backend.submit([req])).get(req.token));
    cluster.inject("scancel", {
      kind: "refuse",
      stderr: `scancel: error: Kill job error on job id ${handle}: Access/permission denied\n`,
    });
    expect((await backend.cancel([target(req, handle)])).get(req.allocationId)?.kind).toBe(
      "Unavailable",
    );
    cluster.inject("scancel", {
      kind: "refuse",
      stderr: `scancel: error: Kill job error on job id ${handle}: Job/step already completing or completed\n`,
    });
    expect((await backend.cancel([target(req, handle)])).get(req.allocationId)?.kind).toBe(
      "Requested",
    );
  });
});

describe("findByToken", () => {
  test("one squeue and one sacct for all tokens; absent only on two answers", async () => {
    const reqs = Array.from({ length: 10 }, () => request(dir, command(["/bin/true"])));
    await backend.submit(reqs.slice(0, 5));
    const before = { squeue: cluster.count("squeue"), sacct: cluster.count("sacct") };
    const found = await backend.findByToken(reqs.map((r) => r.token));
    expect(cluster.count("squeue") - before.squeue).toBe(1);
    expect(cluster.count("sacct") - before.sacct).toBe(1);
    expect(reqs.map((r) => found.get(r.token)?.kind)).toEqual([
      ...Array(5).fill("Found"),
      ...Array(5).fill("Absent"),
    ]);
  });

  test("an accounting failure is Unavailable for the tokens the queue did not have", async () => {
    const reqs = Array.from({ length: 2 }, () => request(dir, command(["/bin/true"])));
    await backend.submit(reqs.slice(0, 1));
    cluster.inject("sacct", { kind: "timeout" });
    const found = await backend.findByToken(reqs.map((r) => r.token));
    expect(found.get(reqs[0]?.token ?? ("" as never))?.kind).toBe("Found");
    expect(found.get(reqs[1]?.token ?? ("" as never))?.kind).toBe("Unavailable");
  });
});

describe("runTask", () => {
  async function one(state: string) {
    const req = request(dir, command(["/bin/sleep", "60"]));
    const handle = created((await backend.submit([req])).get(req.token));
    cluster.setState(handle, state);
    return { req, handle };
  }

  test("runs a step inside the live allocation, in its working directory", async () => {
    const { req, handle } = await one("RUNNING");
    cluster.stepHandler = () => ({ exitCode: 5, stdout: "hi\n", stderr: "" });
    const result = await backend.capabilities.tasks.runTask(
      target(req, handle),
      ["/bin/sh", "-c", "exit 5"],
      {
        timeoutMs: 10_000,
      },
    );
    expect(result).toEqual({ kind: "Completed", exitCode: 5, stdout: "hi\n", stderr: "" });
    const srun = cluster.calls.find((c) => c.program === "srun");
    expect(srun?.args).toContain(`--jobid=${handle}`);
    expect(srun?.args).toContain("--overlap");
    expect(srun?.args).toContain(`--chdir=${req.workspaceDir}`);
    expect(srun?.args.slice(srun.args.indexOf("--") + 1)).toEqual(["/bin/sh", "-c", "exit 5"]);
  });

  for (const state of ["PENDING", "COMPLETED", "COMPLETING", "SUSPENDED"]) {
    test(`refuses when the allocation is ${state}, and never submits a new one (INV-4)`, async () => {
      const { req, handle } = await one(state);
      const sbatchBefore = cluster.count("sbatch");
      const result = await backend.capabilities.tasks.runTask(target(req, handle), ["/bin/true"], {
        timeoutMs: 1000,
      });
      expect(result.kind).toBe("Refused");
      expect(cluster.count("srun")).toBe(0);
      expect(cluster.count("sbatch")).toBe(sbatchBefore);
    });
  }

  test("refuses when the job is gone from the queue", async () => {
    const { req, handle } = await one("RUNNING");
    cluster.purge(handle);
    expect(
      (
        await backend.capabilities.tasks.runTask(target(req, handle), ["/bin/true"], {
          timeoutMs: 1000,
        })
      ).kind,
    ).toBe("Refused");
  });

  test("an unreachable controller is Unavailable; srun's own refusal is Refused; a timeout is not Completed", async () => {
    const { req, handle } = await one("RUNNING");
    cluster.inject("squeue", { kind: "unreachable" });
    expect(
      (
        await backend.capabilities.tasks.runTask(target(req, handle), ["/bin/true"], {
          timeoutMs: 1000,
        })
      ).kind,
    ).toBe("Unavailable");
    cluster.inject("srun", {
      kind: "refuse",
      stderr: `srun: error: Slurm job ${handle} has expired\n`,
    });
    expect(
      (
        await backend.capabilities.tasks.runTask(target(req, handle), ["/bin/true"], {
          timeoutMs: 1000,
        })
      ).kind,
    ).toBe("Refused");
    cluster.inject("srun", { kind: "timeout" });
    expect(
      (
        await backend.capabilities.tasks.runTask(target(req, handle), ["/bin/true"], {
          timeoutMs: 1000,
        })
      ).kind,
    ).toBe("Unavailable");
  });

  test("a task that prints scheduler-like errors and fails is still the task's exit", async () => {
    const { req, handle } = await one("RUNNING");
    cluster.stepHandler = () => ({
      exitCode: 1,
      stdout: "",
      stderr: "Connection refused\nsrun: error: n1: task 0: Exited with exit code 1\n",
    });
    const result = await backend.capabilities.tasks.runTask(target(req, handle), ["/bin/false"], {
      timeoutMs: 1000,
    });
    expect(result).toMatchObject({ kind: "Completed", exitCode: 1 });
  });
});
