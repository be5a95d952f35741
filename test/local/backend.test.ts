/**
 * The local backend with real processes: the real supervisor (`bun src/main.ts __supervise`),
 * real process groups, real files. "Daemon restart" is a new backend instance on the same
 * directory, which is all a restarted daemon has.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LOCAL_FAULT_POINTS } from "../../src/adapters/backend-local/backend-options.ts";
import type { SubmitResult } from "../../src/core/ports/allocation-backend.ts";
import { sessionIsolationVerdict } from "../../src/core/ports/allocation-backend.ts";
import {
  cleanUpStates,
  crashAt,
  DAEMON_SECRET_NAME,
  jobFile,
  lines,
  makeBackend,
  makeRequest,
  makeState,
  observeOne,
  phaseOf,
  processAlive,
  readJson,
  SimulatedCrash,
  targetOf,
  waitFor,
  waitForPhase,
} from "../support/local-backend.ts";

// Real processes on a machine other suites load too: generous, and the waits inside are
// bounded by their own deadlines.
setDefaultTimeout(60_000);

afterEach(() => {
  cleanUpStates();
});

async function submitOne(
  backend: ReturnType<typeof makeBackend>,
  request: ReturnType<typeof makeRequest>,
): Promise<SubmitResult> {
  const results = await backend.submit([request]);
  const result = results.get(request.token);
  if (result === undefined) throw new Error("no submit result for the token");
  return result;
}

describe("local backend: running jobs", () => {
  test("a command runs as RUNNING then COMPLETED with exit code 0; output goes to files", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const request = makeRequest(state, ["sh", "-c", "echo out; echo err >&2; sleep 0.7; pwd"]);
    const result = await submitOne(backend, request);
    expect(result.kind).toBe("Created");
    if (result.kind !== "Created") return;
    expect(result.handle as string).toBe(request.token);

    const running = await waitForPhase(backend, request, ["RUNNING", "COMPLETED"]);
    expect(phaseOf(running)).toBe("RUNNING");
    if (running.kind === "Observed") expect(running.startedAt).not.toBeNull();

    const done = await waitForPhase(backend, request, ["COMPLETED", "FAILED", "LOST"]);
    expect(done).toMatchObject({ phase: "COMPLETED", reason: "EXITED_ZERO", exitCode: 0 });
    if (done.kind === "Observed") expect(done.endedAt).toBeGreaterThanOrEqual(done.startedAt ?? 0);
    const out = readFileSync(join(request.allocationDir, "stdout.log"), "utf8");
    expect(out).toBe(`out\n${request.workspaceDir}\n`);
    expect(readFileSync(join(request.allocationDir, "stderr.log"), "utf8")).toBe("err\n");
  });

  test("a nonzero exit is FAILED / NONZERO_EXIT with the exit code", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const request = makeRequest(state, ["sh", "-c", "exit 3"]);
    expect((await submitOne(backend, request)).kind).toBe("Created");
    const done = await waitForPhase(backend, request, ["COMPLETED", "FAILED", "LOST"]);
    expect(done).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 });
  });

  test("a job killed by a signal is FAILED with 128+N, never COMPLETED", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const request = makeRequest(state, ["sh", "-c", "kill -9 $$"]);
    await submitOne(backend, request);
    const done = await waitForPhase(backend, request, ["COMPLETED", "FAILED", "LOST"]);
    expect(done).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 137 });
  });

  test("a command that cannot be started is FAILED with 127", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const request = makeRequest(state, ["/nonexistent/program"]);
    await submitOne(backend, request);
    const done = await waitForPhase(backend, request, ["COMPLETED", "FAILED", "LOST"]);
    expect(done).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 127 });
  });

  test("the time limit stops the group: FAILED / TIME_LIMIT_EXCEEDED, SIGKILL after the grace", async () => {
    const state = makeState();
    const backend = makeBackend(state, { killGraceMs: 300 });
    // Ignores SIGTERM (and so does its child), so only the SIGKILL after the grace ends it.
    const request = makeRequest(state, ["sh", "-c", 'trap "" TERM; sleep 30; echo never'], {
      timeLimitSeconds: 1,
    });
    const started = Date.now();
    await submitOne(backend, request);
    const done = await waitForPhase(backend, request, ["COMPLETED", "FAILED", "LOST"], 8_000);
    const elapsedMs = Date.now() - started;
    expect(done).toMatchObject({ phase: "FAILED", reason: "TIME_LIMIT_EXCEEDED", exitCode: 137 });
    expect(elapsedMs).toBeGreaterThanOrEqual(1_000);
    expect(elapsedMs).toBeLessThan(6_000);
    const job = readJson(jobFile(state, request.token, "job.json"));
    expect(processAlive(Number(job["pid"]))).toBe(false);
    expect(readFileSync(join(request.allocationDir, "stdout.log"), "utf8")).toBe("");
  });

  test("runway: the job's OPENAI4S_DEADLINE, the observed deadlineAt and the limit agree", async () => {
    const state = makeState();
    const backend = makeBackend(state, { killGraceMs: 300 });
    // Prints its deadline, then outlives it: only the time limit ends it.
    const request = makeRequest(state, ["sh", "-c", 'echo "d=$OPENAI4S_DEADLINE"; sleep 30'], {
      timeLimitSeconds: 3,
    });
    await submitOne(backend, request);
    const running = await waitForPhase(backend, request, ["RUNNING"], 8_000);
    const job = readJson(jobFile(state, request.token, "job.json"));
    const deadlineAt = Number(job["startedAt"]) + 3_000;
    expect(running).toMatchObject({ phase: "RUNNING", deadlineAt });
    const stdout = join(request.allocationDir, "stdout.log");
    await waitFor(
      () => (existsSync(stdout) ? readFileSync(stdout, "utf8") : ""),
      (text) => text.includes("\n"),
      8_000,
    );
    expect(readFileSync(stdout, "utf8")).toBe(`d=${Math.floor(deadlineAt / 1000)}\n`);
    const done = await waitForPhase(backend, request, ["COMPLETED", "FAILED", "LOST"], 10_000);
    expect(done).toMatchObject({ phase: "FAILED", reason: "TIME_LIMIT_EXCEEDED" });
    // Ended by the limit it was told about: not before the deadline (the end is recorded
    // after the SIGTERM it got at the deadline).
    expect(done.kind === "Observed" ? (done.endedAt ?? 0) : 0).toBeGreaterThanOrEqual(deadlineAt);
  });

  test("runway: the job's group gets SIGURG before its limit (lead capped at half its time)", async () => {
    const state = makeState();
    const backend = makeBackend(state, { killGraceMs: 300 });
    // Catches the warning and ends cleanly; without it the limit would end it FAILED.
    const request = makeRequest(
      state,
      [
        "sh",
        "-c",
        'trap "echo warned; exit 0" URG; i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done',
      ],
      { timeLimitSeconds: 4 },
    );
    await submitOne(backend, request);
    const done = await waitForPhase(backend, request, ["COMPLETED", "FAILED", "LOST"], 10_000);
    expect(done).toMatchObject({ phase: "COMPLETED", exitCode: 0 });
    expect(readFileSync(join(request.allocationDir, "stdout.log"), "utf8")).toBe("warned\n");
    // Warned at the deadline minus half of the 4 s (the default 5 min lead is capped).
    const job = readJson(jobFile(state, request.token, "job.json"));
    const ended = done.kind === "Observed" ? (done.endedAt ?? 0) : 0;
    expect(ended).toBeGreaterThanOrEqual(Number(job["startedAt"]) + 2_000);
    expect(ended).toBeLessThan(Number(job["startedAt"]) + 4_000);
  });

  test("a job without a time limit has no OPENAI4S_DEADLINE and no deadlineAt", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const request = makeRequest(state, ["sh", "-c", `echo "d=\${OPENAI4S_DEADLINE-unset}"`]);
    await submitOne(backend, request);
    const done = await waitForPhase(backend, request, ["COMPLETED", "FAILED", "LOST"], 8_000);
    expect(done).toMatchObject({ phase: "COMPLETED" });
    expect(readFileSync(join(request.allocationDir, "stdout.log"), "utf8")).toBe("d=unset\n");
  });

  test("a profile's time limit applies when the request has none", async () => {
    const state = makeState();
    const backend = makeBackend(state, {
      profiles: [
        {
          name: "short",
          description: "one second",
          kinds: ["BATCH"],
          resources: { nodes: 1, cpus: 1, gpus: 0, memoryMb: null, timeLimitSeconds: 1 },
        },
      ],
    });
    const request = makeRequest(state, ["sleep", "30"], { profile: "short" });
    await submitOne(backend, request);
    const done = await waitForPhase(backend, request, ["COMPLETED", "FAILED", "LOST"], 8_000);
    expect(done).toMatchObject({ phase: "FAILED", reason: "TIME_LIMIT_EXCEEDED" });
  });

  test("cancel kills the whole group, grandchildren included", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const pidsFile = join(state.root, "pids");
    const script = `sleep 300 & echo $! >> ${pidsFile}; sh -c 'sleep 300 & echo $! >> ${pidsFile}; wait' & wait`;
    const request = makeRequest(state, ["sh", "-c", script]);
    await submitOne(backend, request);
    await waitForPhase(backend, request, ["RUNNING"]);
    const pids = (
      await waitFor(
        () => lines(pidsFile),
        (l) => l.length === 2,
      )
    ).map(Number);
    for (const pid of pids) expect(processAlive(pid)).toBe(true);

    const cancelled = await backend.cancel([targetOf(request)]);
    expect(cancelled.get(request.allocationId)).toEqual({ kind: "Requested" });
    const done = await waitForPhase(backend, request, ["CANCELLED", "COMPLETED", "FAILED", "LOST"]);
    expect(done).toMatchObject({ phase: "CANCELLED", reason: "USER_CANCELLED" });
    for (const pid of pids)
      await waitFor(
        () => processAlive(pid),
        (alive) => !alive,
        3_000,
      );
    // Idempotent, and still CANCELLED afterwards.
    expect((await backend.cancel([targetOf(request)])).get(request.allocationId)).toEqual({
      kind: "Requested",
    });
    expect(await observeOne(backend, request)).toMatchObject({ phase: "CANCELLED" });
  });

  test("the job sees a minimal environment: nothing of the daemon's leaks", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    process.env["O4S_TEST_PROCESS_LEAK"] = "leaked";
    try {
      const envFile = join(state.root, "env.txt");
      const request = makeRequest(state, ["sh", "-c", `env > ${envFile}`], {
        launch: { kind: "COMMAND", command: ["sh", "-c", `env > ${envFile}`], env: { FOO: "bar" } },
      });
      await submitOne(backend, request);
      await waitForPhase(backend, request, ["COMPLETED"]);
      const env = new Map(
        lines(envFile).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
      );
      expect(env.get("FOO")).toBe("bar");
      expect(env.get("OPENAI4S_WORKLOAD_ID")).toBe(request.workloadId);
      expect(env.get("OPENAI4S_ALLOCATION_ID")).toBe(request.allocationId);
      expect(env.get("OPENAI4S_EPOCH")).toBe("1");
      expect(env.get("PATH")).toBe(process.env["PATH"]);
      // HOME is the one place the job can write; LANG is UTF-8 whatever the daemon had.
      expect(env.get("HOME")).toBe(request.workspaceDir);
      expect(env.get("LANG")).toMatch(/\.UTF-8$/i);
      expect(env.has(DAEMON_SECRET_NAME)).toBe(false);
      expect(env.has("O4S_TEST_PROCESS_LEAK")).toBe(false);
      const allowed = new Set([
        "FOO",
        "OPENAI4S_WORKLOAD_ID",
        "OPENAI4S_ALLOCATION_ID",
        "OPENAI4S_EPOCH",
        "PATH",
        "HOME",
        "LANG",
        // Set by sh itself.
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
      ]);
      expect([...env.keys()].filter((k) => !allowed.has(k))).toEqual([]);
      // The host-side process the supervisor starts gets the backend's fixed environment; the
      // job's variables are on its argv, applied by `env -i` as the last step before the job.
      const record = readJson(jobFile(state, request.token, "record.json"));
      expect(record["env"]).toEqual({ PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8" });
      const argv = record["argv"] as string[];
      const envAt = argv.indexOf("/usr/bin/env");
      expect(argv.slice(envAt, envAt + 3)).toEqual(["/usr/bin/env", "-i", "--"]);
      expect(argv.indexOf("FOO=bar")).toBeGreaterThan(envAt);
    } finally {
      delete process.env["O4S_TEST_PROCESS_LEAK"];
    }
  });
});

describe("local backend: durable records (INV-8)", () => {
  test("after a restart findByToken finds the running job, a finished job's exit, and absence", async () => {
    const state = makeState();
    const before = makeBackend(state);
    const long = makeRequest(state, ["sh", "-c", "sleep 1.5"]);
    const short = makeRequest(state, ["sh", "-c", "exit 0"]);
    const never = makeRequest(state, ["true"]);
    await before.submit([long, short]);
    await waitForPhase(before, short, ["COMPLETED"]);
    await waitForPhase(before, long, ["RUNNING"]);

    const after = makeBackend(state);
    const found = await after.findByToken([long.token, short.token, never.token]);
    expect(found.get(long.token)).toMatchObject({
      kind: "Found",
      handle: long.token,
      observation: { phase: "RUNNING" },
    });
    expect(found.get(short.token)).toMatchObject({
      kind: "Found",
      observation: { phase: "COMPLETED", exitCode: 0 },
    });
    expect(found.get(never.token)).toEqual({ kind: "Absent" });
    // The running job is still supervised by a process the old instance did not own.
    const done = await waitForPhase(after, long, ["COMPLETED", "FAILED", "LOST"]);
    expect(done).toMatchObject({ phase: "COMPLETED", exitCode: 0 });
  });

  test("the same token submitted twice runs once: Existing, in one batch and across instances", async () => {
    const state = makeState();
    const marker = join(state.root, "marker");
    const request = makeRequest(state, ["sh", "-c", `echo ran >> ${marker}; sleep 0.3`]);
    const first = makeBackend(state);
    const second = makeBackend(state);
    expect((await submitOne(first, request)).kind).toBe("Created");
    expect((await submitOne(first, request)).kind).toBe("Existing");
    expect((await submitOne(second, request)).kind).toBe("Existing");
    await waitForPhase(first, request, ["COMPLETED"]);
    expect((await submitOne(second, request)).kind).toBe("Existing");
    expect(lines(marker)).toEqual(["ran"]);
  });

  test("a supervisor SIGKILLed without an exit record is LOST, never COMPLETED; its job is stopped", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const request = makeRequest(state, ["sleep", "300"]);
    await submitOne(backend, request);
    await waitForPhase(backend, request, ["RUNNING"]);
    const supervisorPid = Number(readJson(jobFile(state, request.token, "claim.json"))["pid"]);
    const jobPid = Number(readJson(jobFile(state, request.token, "job.json"))["pid"]);
    process.kill(supervisorPid, "SIGKILL");
    await waitFor(
      () => processAlive(supervisorPid),
      (alive) => !alive,
    );

    const lost = await observeOne(backend, request);
    expect(lost).toMatchObject({ phase: "LOST", reason: "NOT_FOUND_BY_BACKEND", exitCode: null });
    await waitFor(
      () => processAlive(jobPid),
      (alive) => !alive,
      3_000,
    );
    expect(existsSync(jobFile(state, request.token, "exit.json"))).toBe(false);
    const fresh = makeBackend(state);
    expect((await fresh.findByToken([request.token])).get(request.token)).toMatchObject({
      kind: "Found",
      observation: { phase: "LOST" },
    });
  });

  test("a record written before a crash (no supervisor yet) is found QUEUED and then runs once", async () => {
    const state = makeState();
    const marker = join(state.root, "marker");
    const request = makeRequest(state, ["sh", "-c", `echo ran >> ${marker}`]);
    const crashing = makeBackend(state, {
      faults: crashAt(LOCAL_FAULT_POINTS.afterRecordBeforeSpawn),
    });
    await expect(crashing.submit([request])).rejects.toBeInstanceOf(SimulatedCrash);
    expect(existsSync(jobFile(state, request.token, "record.json"))).toBe(true);
    expect(existsSync(jobFile(state, request.token, "supervisor.log"))).toBe(false);

    const restarted = makeBackend(state);
    const found = (await restarted.findByToken([request.token])).get(request.token);
    expect(found).toMatchObject({ kind: "Found", observation: { phase: "QUEUED" } });
    const done = await waitForPhase(restarted, request, ["COMPLETED", "FAILED", "LOST"]);
    expect(done).toMatchObject({ phase: "COMPLETED" });
    expect(lines(marker)).toEqual(["ran"]);
  });

  test("a crash right after the supervisor started: a second supervisor loses the claim", async () => {
    const state = makeState();
    const marker = join(state.root, "marker");
    const request = makeRequest(state, ["sh", "-c", `echo ran >> ${marker}; sleep 0.5`]);
    const crashing = makeBackend(state, { faults: crashAt(LOCAL_FAULT_POINTS.afterSpawn) });
    await expect(crashing.submit([request])).rejects.toBeInstanceOf(SimulatedCrash);
    // Looked at at once, before the first supervisor has claimed: a second one is started.
    const restarted = makeBackend(state);
    expect((await submitOne(restarted, request)).kind).toBe("Existing");
    const done = await waitForPhase(restarted, request, ["COMPLETED", "FAILED", "LOST"]);
    expect(done).toMatchObject({ phase: "COMPLETED" });
    expect(lines(marker)).toEqual(["ran"]);
    // Both supervisors logged to the same file: one claimed, every other one stood down.
    const extra = (await restarted.diagnostics()).calls["spawnSupervisor"] ?? 0;
    const log = readFileSync(jobFile(state, request.token, "supervisor.log"), "utf8");
    expect(log.match(/"claimed job"/g)?.length).toBe(1);
    expect(log.match(/already claimed/g)?.length ?? 0).toBe(extra);
  });

  test("supervisors racing for one record: exactly one runs the job", async () => {
    const state = makeState();
    const marker = join(state.root, "marker");
    const request = makeRequest(state, ["sh", "-c", `echo ran >> ${marker}`]);
    const crashing = makeBackend(state, {
      faults: crashAt(LOCAL_FAULT_POINTS.afterRecordBeforeSpawn),
    });
    await expect(crashing.submit([request])).rejects.toBeInstanceOf(SimulatedCrash);
    const dir = join(state.backendDir, "jobs", request.token);
    const { selfCommand } = await import("../../src/lib/self-command.ts");
    const racers = Array.from({ length: 4 }, () =>
      Bun.spawn([...selfCommand(), "__supervise", "--job-dir", dir], {
        stdio: ["ignore", "ignore", "pipe"],
      }),
    );
    const codes = await Promise.all(racers.map((p) => p.exited));
    expect(codes).toEqual([0, 0, 0, 0]);
    const logs = await Promise.all(racers.map((p) => new Response(p.stderr).text()));
    expect(logs.filter((l) => l.includes("claimed job")).length).toBe(1);
    expect(logs.filter((l) => l.includes("already claimed")).length).toBe(3);
    expect(lines(marker)).toEqual(["ran"]);
    expect(await observeOne(makeBackend(state), request)).toMatchObject({ phase: "COMPLETED" });
  });

  test("cancelling a recorded job nobody started withdraws it: it never runs", async () => {
    const state = makeState();
    const marker = join(state.root, "marker");
    const request = makeRequest(state, ["sh", "-c", `echo ran >> ${marker}`]);
    const crashing = makeBackend(state, {
      faults: crashAt(LOCAL_FAULT_POINTS.afterRecordBeforeSpawn),
    });
    await expect(crashing.submit([request])).rejects.toBeInstanceOf(SimulatedCrash);
    const restarted = makeBackend(state);
    expect((await restarted.cancel([targetOf(request)])).get(request.allocationId)).toEqual({
      kind: "Requested",
    });
    expect(await observeOne(restarted, request)).toMatchObject({
      phase: "CANCELLED",
      reason: "USER_CANCELLED",
    });
    expect(existsSync(jobFile(state, request.token, "supervisor.log"))).toBe(false);
    expect(lines(marker)).toEqual([]);
  });

  test("a supervisor that dies before claiming fails the job once instead of respawning forever", async () => {
    const state = makeState();
    const backend = makeBackend(state, { selfCommand: ["/bin/false"] });
    const request = makeRequest(state, ["true"]);
    expect((await submitOne(backend, request)).kind).toBe("Created");
    const done = await waitForPhase(backend, request, ["FAILED", "COMPLETED", "LOST"]);
    expect(done).toMatchObject({ phase: "FAILED", reason: "INTERNAL_ERROR" });
    await observeOne(backend, request);
    expect((await backend.diagnostics()).calls["spawnSupervisor"]).toBe(1);
  });

  test("a missing jobs directory is Unavailable, not every job LOST", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const request = makeRequest(state, ["true"]);
    rmSync(join(state.backendDir, "jobs"), { recursive: true });
    const observed = await backend.observe([targetOf(request)]);
    expect(observed.kind).toBe("Unavailable");
    expect((await backend.findByToken([request.token])).get(request.token)?.kind).toBe(
      "Unavailable",
    );
    expect((await backend.diagnostics()).healthy).toBe(false);
  });

  test("an unknown handle shape is Indeterminate; a token with no record observes as LOST", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const request = makeRequest(state, ["true"]);
    const result = await backend.observe([
      { ...targetOf(request), handle: "12345" as ReturnType<typeof targetOf>["handle"] },
    ]);
    expect(result.kind === "Observed" && result.observations.get(request.allocationId)?.kind).toBe(
      "Indeterminate",
    );
    expect(await observeOne(backend, request)).toMatchObject({
      phase: "LOST",
      reason: "NOT_FOUND_BY_BACKEND",
    });
  });
});

describe("local backend: admission of requests", () => {
  test("refusals write nothing and say why", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const cases = [
      makeRequest(state, ["true"], { profile: "gpu-huge" }),
      makeRequest(state, []),
      makeRequest(state, ["true"], {
        launch: { kind: "COMMAND", command: ["true"], env: { "BAD NAME": "x" } },
      }),
      makeRequest(state, ["true"], { timeLimitSeconds: -1 }),
      makeRequest(state, ["true"], {
        workloadKind: "SESSION",
        launch: {
          kind: "WORKER",
          workerCommand: ["/bin/true"],
          credentialDir: state.root,
          ranks: 1,
          env: {},
        },
      }),
    ];
    const results = await backend.submit(cases);
    for (const request of cases) {
      expect(results.get(request.token)?.kind).toBe("Rejected");
    }
    expect(readdirSync(join(state.backendDir, "jobs"))).toEqual([]);
  });

  test("without a sandbox the backend does not declare session isolation", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    expect(backend.capabilities.sessionIsolation).toBeNull();
    expect(await sessionIsolationVerdict(backend)).toMatchObject({ kind: "Unverified" });
    expect(backend.capabilities.tasks).not.toBeNull();
    expect(backend.capabilities.terminalFacts).not.toBeNull();
    const [profile] = backend.profiles();
    expect(profile).toMatchObject({ name: "default", kinds: ["BATCH", "SESSION"] });
    expect(profile?.resources.nodes).toBe(1);
  });
});

describe("local backend: acknowledging terminal facts", () => {
  test("finished records are kept until acknowledged; live ones are never dropped", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const done = makeRequest(state, ["true"]);
    const live = makeRequest(state, ["sleep", "300"]);
    await backend.submit([done, live]);
    await waitForPhase(backend, done, ["COMPLETED"]);
    await waitForPhase(backend, live, ["RUNNING"]);

    const facts = await backend.capabilities.terminalFacts.pendingTerminalFacts();
    expect(facts.map((f) => f.token)).toEqual([done.token]);
    await backend.capabilities.terminalFacts.acknowledgeTerminal(live.token);
    expect(await observeOne(backend, live)).toMatchObject({ phase: "RUNNING" });

    await backend.capabilities.terminalFacts.acknowledgeTerminal(done.token);
    expect(existsSync(join(state.backendDir, "jobs", done.token))).toBe(false);
    expect((await backend.findByToken([done.token])).get(done.token)).toEqual({ kind: "Absent" });
    expect(await backend.capabilities.terminalFacts.pendingTerminalFacts()).toEqual([]);
    // Acknowledging twice is harmless.
    await backend.capabilities.terminalFacts.acknowledgeTerminal(done.token);
  });

  test("a crash mid-deletion leaves a trash directory that the next sweep removes", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const trash = join(state.backendDir, "jobs", ".trash-o4s-x-1");
    const { mkdirSync } = await import("node:fs");
    mkdirSync(trash);
    writeFileSync(join(trash, "record.json"), "{}");
    expect(await backend.capabilities.terminalFacts.pendingTerminalFacts()).toEqual([]);
    expect(existsSync(trash)).toBe(false);
  });
});
