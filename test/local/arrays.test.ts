/**
 * Job arrays on the local backend with real supervisors and processes: the cap measured from
 * inside (each element marks its start and end in one file), a failing element named by its
 * index, a cancel mid-array, and a daemon restart (a new backend on the same directory)
 * mid-array that neither loses nor repeats an element.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, totalmem } from "node:os";
import { join } from "node:path";
import {
  defaultLocalProfiles,
  LOCAL_FAULT_POINTS,
} from "../../src/adapters/backend-local/backend-options.ts";
import type { CgroupDriver } from "../../src/adapters/backend-local/cgroup-port.ts";
import { sweepJobCgroups } from "../../src/adapters/backend-local/cgroup-sweep.ts";
import { isTerminal } from "../../src/core/models.ts";
import type {
  AllocationObservation,
  SubmitRequest,
} from "../../src/core/ports/allocation-backend.ts";
import { silentLog } from "../../src/lib/log.ts";
import {
  cleanUpStates,
  crashAt,
  jobFile,
  lines,
  makeBackend,
  makeRequest,
  makeState,
  observeOne,
  processAlive,
  readJson,
  SimulatedCrash,
  type TestState,
  targetOf,
  waitFor,
  waitForPhase,
} from "../support/local-backend.ts";

setDefaultTimeout(60_000);

afterEach(() => {
  cleanUpStates();
});

const ENDED = ["COMPLETED", "FAILED", "CANCELLED", "LOST"];

/** An array whose elements append "+ K" as they start and "- K" as they end to `marks`. */
function arrayRequest(
  state: TestState,
  body: string,
  size: number,
  maxConcurrent: number | null,
): { readonly request: SubmitRequest; readonly marks: string } {
  const marks = join(state.scratch, "marks");
  const script = `echo "+ $OPENAI4S_ARRAY_INDEX" >> ${marks}; ${body}; rc=$?; echo "- $OPENAI4S_ARRAY_INDEX" >> ${marks}; exit $rc`;
  const request = makeRequest(state, ["/bin/sh", "-c", script], {
    array: { size, maxConcurrent },
  });
  return { request, marks };
}

/** The most elements that were running at once, and how often each index started. */
function readMarks(marks: string): { maxRunning: number; starts: Map<number, number> } {
  let running = 0;
  let maxRunning = 0;
  const starts = new Map<number, number>();
  for (const line of lines(marks)) {
    const [sign, index] = line.split(" ");
    if (sign === "+") {
      running += 1;
      starts.set(Number(index), (starts.get(Number(index)) ?? 0) + 1);
    } else running -= 1;
    maxRunning = Math.max(maxRunning, running);
  }
  return { maxRunning, starts };
}

function summaryOf(o: AllocationObservation) {
  if (o.kind !== "Observed" || o.array === undefined) throw new Error(JSON.stringify(o));
  return o.array;
}

describe("local job arrays", () => {
  test("at most maxConcurrent elements run at once, each once, each with its own log", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const { request, marks } = arrayRequest(
      state,
      "sleep 0.3; echo element $OPENAI4S_ARRAY_INDEX",
      6,
      2,
    );
    const submitted = await backend.submit([request]);
    expect(submitted.get(request.token)?.kind).toBe("Created");
    const done = await waitForPhase(backend, request, ENDED);
    expect(done).toMatchObject({ phase: "COMPLETED", reason: "EXITED_ZERO", exitCode: 0 });
    expect(summaryOf(done)).toMatchObject({ size: 6, counts: { COMPLETED: 6 } });
    const { maxRunning, starts } = readMarks(marks);
    expect(maxRunning).toBe(2);
    expect([...starts.entries()].sort((a, b) => a[0] - b[0])).toEqual(
      [0, 1, 2, 3, 4, 5].map((i) => [i, 1]),
    );
    for (const index of [0, 5]) {
      const log = readFileSync(join(request.allocationDir, `stdout.log.${index}`), "utf8");
      expect(log).toBe(`element ${index}\n`);
    }
    // One submission, one record: the token finds the array, and a retry is Existing.
    const found = (await backend.findByToken([request.token])).get(request.token);
    expect(found).toMatchObject({ kind: "Found", observation: { phase: "COMPLETED" } });
    expect((await backend.submit([request])).get(request.token)?.kind).toBe("Existing");
  });

  test("without maxConcurrent, as many run at once as this machine holds by the profile's size", async () => {
    const state = makeState();
    const [builtIn] = defaultLocalProfiles();
    if (builtIn === undefined) throw new Error("no built-in profile");
    const small = { ...builtIn, resources: { ...builtIn.resources, cpus: 1, memoryMb: 64 } };
    const backend = makeBackend(state, { profiles: [small] });
    const { request } = arrayRequest(state, "true", 4, null);
    await backend.submit([request]);
    const hostFits = Math.min(availableParallelism(), Math.floor(totalmem() / 1024 ** 2 / 64));
    const record = readJson(jobFile(state, request.token, "record.json"));
    expect(record["array"]).toEqual({ size: 4, maxConcurrent: Math.min(4, hostFits) });
    await waitForPhase(backend, request, ENDED);
  });

  test("one failing element makes the array FAILED, naming its index and exit code", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const body = '[ "$OPENAI4S_ARRAY_INDEX" != 2 ] || exit 3';
    const { request } = arrayRequest(state, body, 4, null);
    await backend.submit([request]);
    const done = await waitForPhase(backend, request, ENDED);
    expect(done).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 });
    if (done.kind === "Observed")
      expect(done.message).toContain("1 of 4 elements failed (index 2)");
    expect(summaryOf(done).elements).toEqual([
      { index: 2, phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 },
    ]);
  });

  test("cancel mid-array stops the running element and starts no more", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const { request, marks } = arrayRequest(state, "sleep 60", 5, 1);
    await backend.submit([request]);
    await waitFor(
      () => readMarks(marks).starts.size,
      (n) => n === 1,
    );
    const running = await waitForPhase(backend, request, ["RUNNING"]);
    expect(summaryOf(running).counts).toEqual({ RUNNING: 1, QUEUED: 4 });
    const pid = elementPid(state, request, 0);
    expect((await backend.cancel([targetOf(request)])).get(request.allocationId)).toEqual({
      kind: "Requested",
    });
    const done = await waitForPhase(backend, request, ENDED);
    expect(done).toMatchObject({ phase: "CANCELLED", reason: "USER_CANCELLED" });
    expect(summaryOf(done).counts).toEqual({ CANCELLED: 5 });
    expect(readMarks(marks).starts.size).toBe(1);
    expect(processAlive(pid)).toBe(false);
  });

  test("a daemon restart mid-array neither loses nor repeats an element", async () => {
    const state = makeState();
    const release = join(state.scratch, "release");
    const wait = `while [ ! -e ${release} ]; do sleep 0.05; done`;
    const { request, marks } = arrayRequest(state, wait, 5, 2);
    await makeBackend(state).submit([request]);
    await waitFor(
      () => readMarks(marks).starts.size,
      (n) => n === 2,
    );
    // The restarted daemon: nothing in memory, only the directory.
    const restarted = makeBackend(state);
    const seen = await observeOne(restarted, request);
    expect(seen).toMatchObject({ phase: "RUNNING" });
    expect(summaryOf(seen).counts).toEqual({ RUNNING: 2, QUEUED: 3 });
    writeFileSync(release, "");
    const done = await waitForPhase(restarted, request, ENDED);
    expect(done).toMatchObject({ phase: "COMPLETED" });
    const { maxRunning, starts } = readMarks(marks);
    expect(maxRunning).toBeLessThanOrEqual(2);
    expect([...starts.values()]).toEqual([1, 1, 1, 1, 1]);
    // The restarted backend started no second supervisor for a claimed array.
    expect((await restarted.diagnostics()).calls["spawnSupervisor"]).toBeUndefined();
  });

  test("a crash after the record, before the supervisor: the restart runs the array once", async () => {
    const state = makeState();
    const { request, marks } = arrayRequest(state, "true", 3, 2);
    const crashing = makeBackend(state, {
      faults: crashAt(LOCAL_FAULT_POINTS.afterRecordBeforeSpawn),
    });
    await expect(crashing.submit([request])).rejects.toBeInstanceOf(SimulatedCrash);
    const restarted = makeBackend(state);
    // The lost answer resolves to the one array, never to one element (INV-8).
    const found = (await restarted.findByToken([request.token])).get(request.token);
    expect(found).toMatchObject({ kind: "Found", observation: { phase: "QUEUED" } });
    if (found?.kind === "Found" && found.observation.kind === "Observed") {
      expect(found.observation.array?.counts).toEqual({ QUEUED: 3 });
    }
    expect((await waitForPhase(restarted, request, ENDED)).kind).toBe("Observed");
    expect(await observeOne(restarted, request)).toMatchObject({ phase: "COMPLETED" });
    expect([...readMarks(marks).starts.values()]).toEqual([1, 1, 1]);
  });

  test("the change feed reports an array's progress and its end", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const release = join(state.scratch, "release");
    const { request } = arrayRequest(state, `while [ ! -e ${release} ]; do sleep 0.05; done`, 2, 1);
    await backend.submit([request]);
    await waitForPhase(backend, request, ["RUNNING"]);
    const feed = backend.capabilities.changes;
    if (feed === null) throw new Error("the local backend has a change feed");
    const opened = await feed.observeChanges(null, [targetOf(request)]);
    if (opened.kind !== "Observed") throw new Error(JSON.stringify(opened));
    let cursor = opened.cursor;
    writeFileSync(release, "");
    const seen: AllocationObservation[] = [];
    await waitFor(
      async () => {
        const next = await feed.observeChanges(cursor, []);
        if (next.kind !== "Observed") throw new Error(JSON.stringify(next));
        cursor = next.cursor;
        seen.push(...next.changes.map((c) => c.observation));
        return seen.at(-1);
      },
      (last) => last !== undefined && last.kind === "Observed" && isTerminal(last.phase),
    );
    const last = seen.at(-1);
    expect(last).toMatchObject({ phase: "COMPLETED" });
    if (last !== undefined) expect(summaryOf(last).counts).toEqual({ COMPLETED: 2 });
  });

  test("an element's planted FIFO, link or hard link at a later element's log name: refused, never opened through", async () => {
    // An owner's allocation directory is the owner's (run_as = "owner"), so an element (or
    // the scientist's shell) can put anything where the root supervisor will open a later
    // element's log: a FIFO would block its open() forever (no element's time limit, cancel
    // or end handled again), a link or a hard link would aim its writes at a host file.
    const state = makeState();
    const backend = makeBackend(state);
    const host = join(state.scratch, "host-file");
    writeFileSync(host, "host\n");
    // The element finds the directory as an attacker would: where its own stdout points.
    const dir = '"$(dirname "$(readlink /proc/$$/fd/1)")"';
    const plant = `if [ "$OPENAI4S_ARRAY_INDEX" = 0 ]; then d=${dir}; mkfifo "$d/stdout.log.1" && ln -s ${host} "$d/stdout.log.2" && ln ${host} "$d/stdout.log.3"; fi`;
    const { request, marks } = arrayRequest(state, plant, 4, 1);
    await backend.submit([request]);
    const done = await waitForPhase(backend, request, ENDED);
    expect(done).toMatchObject({ phase: "FAILED" });
    // 126, the shell's "cannot execute": each was refused at its start.
    expect(summaryOf(done).elements.map((e) => [e.index, e.exitCode])).toEqual([
      [1, 126],
      [2, 126],
      [3, 126],
    ]);
    // None of them ran, and nothing reached the host file.
    expect(readMarks(marks).starts.size).toBe(1);
    expect(readFileSync(host, "utf8")).toBe("host\n");
    const refusals = lines(jobFile(state, request.token, "elements.jsonl"))
      .map((line) => JSON.parse(line) as { index: number; exit?: { message: string } })
      .filter((line) => line.index > 0 && line.exit !== undefined)
      .map((line) => line.exit?.message.replace(/^.*\(/, "").replace(/\).*$/, ""));
    expect(refusals).toEqual(["a FIFO or socket", "a symbolic link", "a hard link, 2 names"]);
  });

  test("the time limit is each element's own, from its own start", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const { request, marks } = arrayRequest(state, "sleep 30", 2, 1);
    await backend.submit([{ ...request, timeLimitSeconds: 1 }]);
    const done = await waitForPhase(backend, request, ENDED);
    expect(done).toMatchObject({ phase: "FAILED", reason: "TIME_LIMIT_EXCEEDED" });
    expect(summaryOf(done).counts).toEqual({ FAILED: 2 });
    // One after the other, each given its full second: the second was not cut by the first's.
    expect(readMarks(marks).starts.size).toBe(2);
    if (done.kind === "Observed") {
      expect((done.endedAt ?? 0) - (done.startedAt ?? 0)).toBeGreaterThanOrEqual(2_000);
    }
  });

  test("its supervisor killed: every unfinished element is LOST and its process group stopped", async () => {
    const state = makeState();
    const backend = makeBackend(state);
    const { request, marks } = arrayRequest(state, "sleep 60", 3, 1);
    await backend.submit([request]);
    await waitFor(
      () => readMarks(marks).starts.size,
      (n) => n === 1,
    );
    const pid = elementPid(state, request, 0);
    const claim = readJson(jobFile(state, request.token, "claim.json"));
    process.kill(Number(claim["pid"]), "SIGKILL");
    const done = await waitForPhase(backend, request, ENDED);
    // Never COMPLETED: nobody recorded how any of them ended, or whether they ran.
    expect(done).toMatchObject({ phase: "FAILED", reason: "NOT_FOUND_BY_BACKEND" });
    expect(summaryOf(done).counts).toEqual({ LOST: 3 });
    await waitFor(
      () => processAlive(pid),
      (alive) => !alive,
    );
  });

  test("the cgroup sweep keeps a live array's element cgroups (TOKEN.K) and removes the rest", async () => {
    const state = makeState();
    const crashing = makeBackend(state, {
      faults: crashAt(LOCAL_FAULT_POINTS.afterRecordBeforeSpawn),
    });
    const { request } = arrayRequest(state, "true", 8, 1);
    // Recorded, never started (nothing looks at it here): a record the sweep must honour.
    await expect(crashing.submit([request])).rejects.toBeInstanceOf(SimulatedCrash);
    const removed: string[] = [];
    const names = [`${request.token}.0`, `${request.token}.7`, "o4s-gone", "o4s-gone.3"];
    const driver = fakeCgroups(names, removed);
    // Unclaimed (its supervisor is starting): its limits are still needed.
    await sweepJobCgroups(driver, state.backendDir, "another-boot", silentLog);
    expect(removed).toEqual(["o4s-gone", "o4s-gone.3"]);
  });
});

/** A cgroup driver over names only: what the sweep removes is recorded. */
function fakeCgroups(names: readonly string[], removed: string[]): CgroupDriver {
  const job = (name: string) => ({
    version: "v2" as const,
    mount: "/none",
    dirs: [`/none/${name}`],
  });
  return {
    version: "v2",
    where: "/none",
    jobCgroup: job,
    jobNames: () => names,
    create() {},
    usage: () => ({ oomKills: 0, peakMemoryBytes: null, pidsRefused: 0 }),
    processes: () => [],
    kill() {},
    remove(cgroup) {
      removed.push(String(cgroup.dirs[0]).slice("/none/".length));
      return true;
    },
    removeRoot: () => false,
  };
}

function elementPid(state: TestState, request: SubmitRequest, index: number): number {
  const path = join(state.backendDir, "jobs", request.token, "elements.jsonl");
  for (const line of lines(path)) {
    const parsed = JSON.parse(line) as { index: number; start?: { pid: number } };
    if (parsed.index === index && parsed.start !== undefined) return parsed.start.pid;
  }
  throw new Error(`element ${index} has not started`);
}
