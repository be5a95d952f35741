/**
 * GET /v1/workloads/{id}/logs over a real store and real files in the harness's state dir:
 * whole file, tail, stderr, attempts, follow until the attempt ends, missing logs as 404
 * problems, and a job's planted symlink or FIFO never followed.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { appendFileSync, linkSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { applyTransition, mintAttempt } from "../../src/adapters/store-sqlite/index.ts";
import { createLogsCommand } from "../../src/apps/cli/logs.ts";
import { stateLayout } from "../../src/core/layout.ts";
import { externalHandle, mintSubmissionToken } from "../../src/core/models.ts";
import { logStream, openLog } from "../../src/servers/http/workloads/log-stream.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";
import { captureIo, runtimeFor } from "../support/cli-runtime.ts";

const open: Harness[] = [];
function make(): Harness {
  const h = harness();
  open.push(h);
  return h;
}
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

async function submit(h: Harness): Promise<string> {
  const res = await h.post("/v1/workloads", { kind: "BATCH", profile: "default", command: ["x"] });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

/** A RUNNING attempt `epoch`, as the reconciler leaves it; returns its log paths. */
function attempt(h: Harness, workloadId: string, epoch: number) {
  const allocationId = `a-${workloadId}-${epoch}`;
  const minted = mintAttempt(h.store, {
    workloadId,
    allocationId,
    token: mintSubmissionToken(random),
    expectedEpoch: epoch - 1,
    message: "submitting",
  });
  expect(minted.kind).toBe("Minted");
  h.clock.advance(1000);
  const moved = applyTransition(h.store, {
    allocation: {
      id: allocationId,
      expectedPhase: "SUBMITTING",
      phase: "RUNNING",
      reason: "STARTED",
      message: "started",
      handle: externalHandle(`${4000 + epoch}`),
      submittedAt: h.clock.now(),
      startedAt: h.clock.now(),
    },
    workload: {
      id: workloadId,
      expectedPhase: "SUBMITTING",
      expectedEpoch: epoch,
      phase: "RUNNING",
      reason: "STARTED",
      message: "started",
    },
  });
  expect(moved).toBe(true);
  const layout = stateLayout(h.dir);
  const stdout = layout.jobLogPath(workloadId, allocationId, "stdout");
  const stderr = layout.jobLogPath(workloadId, allocationId, "stderr");
  mkdirSync(dirname(stdout), { recursive: true });
  return { allocationId, stdout, stderr };
}

function complete(h: Harness, workloadId: string, allocationId: string): void {
  h.clock.advance(1000);
  const moved = applyTransition(h.store, {
    allocation: {
      id: allocationId,
      expectedPhase: "RUNNING",
      phase: "COMPLETED",
      reason: "EXITED_ZERO",
      message: "exit 0",
      exitCode: 0,
      endedAt: h.clock.now(),
    },
    workload: {
      id: workloadId,
      expectedPhase: "RUNNING",
      expectedEpoch: 1,
      phase: "COMPLETED",
      reason: "EXITED_ZERO",
      message: "exit 0",
      exitCode: 0,
    },
  });
  expect(moved).toBe(true);
}

describe("GET /v1/workloads/{id}/logs", () => {
  test("the whole stdout, stderr, the last N lines", async () => {
    const h = make();
    const id = await submit(h);
    const a = attempt(h, id, 1);
    writeFileSync(a.stdout, "one\ntwo\nthree\n");
    writeFileSync(a.stderr, "oops\n");
    const all = await h.request(`/v1/workloads/${id}/logs`);
    expect(all.status).toBe(200);
    expect(await all.text()).toBe("one\ntwo\nthree\n");
    expect(await (await h.request(`/v1/workloads/${id}/logs?stream=stderr`)).text()).toBe("oops\n");
    expect(await (await h.request(`/v1/workloads/${id}/logs?tail=2`)).text()).toBe("two\nthree\n");
    expect(await (await h.request(`/v1/workloads/${id}/logs?tail=0`)).text()).toBe("");
    expect(await (await h.request(`/v1/workloads/${id}/logs?tail=99`)).text()).toBe(
      "one\ntwo\nthree\n",
    );
  });

  test("a large file streams in bounded chunks and tail reads from the end", async () => {
    const h = make();
    const id = await submit(h);
    const a = attempt(h, id, 1);
    const line = `${"x".repeat(99)}\n`;
    writeFileSync(a.stdout, line.repeat(50_000)); // 5 MB
    appendFileSync(a.stdout, "last line without newline");
    const res = await h.request(`/v1/workloads/${id}/logs`);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let total = 0;
    let chunks = 0;
    let largest = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      largest = Math.max(largest, value.byteLength);
      chunks += 1;
    }
    expect(total).toBe(5_000_000 + "last line without newline".length);
    expect(chunks).toBeGreaterThan(10);
    expect(largest).toBeLessThanOrEqual(64 * 1024);
    const tail = await (await h.request(`/v1/workloads/${id}/logs?tail=2`)).text();
    expect(tail).toBe(`${line}last line without newline`);
  });

  test("attempts: the latest by default, an earlier one by number", async () => {
    const h = make();
    const id = await submit(h);
    const first = attempt(h, id, 1);
    writeFileSync(first.stdout, "first\n");
    h.clock.advance(1000);
    applyTransition(h.store, {
      allocation: {
        id: first.allocationId,
        expectedPhase: "RUNNING",
        phase: "FAILED",
        reason: "NODE_FAILURE",
        message: "node died",
        endedAt: h.clock.now(),
      },
      workload: {
        id,
        expectedPhase: "RUNNING",
        expectedEpoch: 1,
        phase: "PENDING",
        reason: "RETRYING",
        message: "retrying",
      },
    });
    const second = attempt(h, id, 2);
    writeFileSync(second.stdout, "second\n");
    expect(await (await h.request(`/v1/workloads/${id}/logs`)).text()).toBe("second\n");
    expect(await (await h.request(`/v1/workloads/${id}/logs?attempt=1`)).text()).toBe("first\n");
    const none = await h.request(`/v1/workloads/${id}/logs?attempt=3`);
    expect(none.status).toBe(404);
    expect((await problemOf(none)).detail).toContain("no attempt 3");
  });

  test("missing log, no attempt yet, unknown workload: 404 problems that say which", async () => {
    const h = make();
    const id = await submit(h);
    const early = await h.request(`/v1/workloads/${id}/logs`);
    expect(early.status).toBe(404);
    expect((await problemOf(early)).detail).toContain("no attempt yet");
    attempt(h, id, 1);
    const missing = await h.request(`/v1/workloads/${id}/logs?stream=stderr`);
    expect(missing.status).toBe(404);
    expect((await problemOf(missing)).detail).toContain("has no stderr log");
    const unknown = await h.request(`/v1/workloads/w-nope/logs`);
    expect(unknown.status).toBe(404);
    const bad = await h.request(`/v1/workloads/${id}/logs?stream=both&tail=-1&junk=1`);
    expect(bad.status).toBe(400);
    expect((await problemOf(bad)).errors.map((e) => e.path).sort()).toEqual([
      "junk",
      "stream",
      "tail",
    ]);
  });

  test("a job's symlink or FIFO in place of its log is refused, never followed", async () => {
    const h = make();
    const id = await submit(h);
    const a = attempt(h, id, 1);
    const secret = `${h.dir}/signing-key-like`;
    writeFileSync(secret, "TOP SECRET\n", { mode: 0o600 });
    symlinkSync(secret, a.stdout);
    const viaLink = await h.request(`/v1/workloads/${id}/logs`);
    expect(viaLink.status).toBe(404);
    expect(await viaLink.text()).not.toContain("TOP SECRET");
    const fifo = Bun.spawnSync(["mkfifo", a.stderr]);
    expect(fifo.exitCode).toBe(0);
    // A blocking open of a FIFO with no writer would hang this request forever.
    const viaFifo = await h.request(`/v1/workloads/${id}/logs?stream=stderr`);
    expect(viaFifo.status).toBe(404);
    expect((await problemOf(viaFifo)).detail).toContain("not a regular file");
  });

  test("follow: waits for the file, streams what is written, ends when the attempt ends", async () => {
    const h = make();
    const id = await submit(h);
    const res = await h.request(`/v1/workloads/${id}/logs?follow=true`);
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    const a = attempt(h, id, 1);
    writeFileSync(a.stdout, "early\n");
    const first = await reader.read();
    expect(decoder.decode(first.value)).toBe("early\n");
    appendFileSync(a.stdout, "later\n");
    expect(decoder.decode((await reader.read()).value)).toBe("later\n");
    // Written just before the end is still delivered; then the stream ends.
    appendFileSync(a.stdout, "last\n");
    complete(h, id, a.allocationId);
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += decoder.decode(value);
    }
    expect(rest).toBe("last\n");
  });

  test("openai4s logs prints the log; a missing one is exit 1 naming the reason", async () => {
    const h = make();
    const id = await submit(h);
    const a = attempt(h, id, 1);
    writeFileSync(a.stdout, "héllo\nworld\n");
    const command = createLogsCommand(runtimeFor(h));
    const io = captureIo();
    expect(await command.run([id, "--tail", "1"], io)).toBe(0);
    expect(io.out()).toBe("world\n");
    const all = captureIo();
    expect(await command.run([id], all)).toBe(0);
    expect(all.out()).toBe("héllo\nworld\n");
    const missing = captureIo();
    expect(await command.run([id, "--stderr"], missing)).toBe(1);
    expect(missing.err()).toContain("openai4s logs: ");
    expect(missing.err()).toContain("stderr log");
  });
});

describe("logStream", () => {
  test("output written between the last read and the end of the attempt is delivered", async () => {
    const h = make();
    const path = `${h.dir}/race.log`;
    writeFileSync(path, "before\n");
    const first = await openLog(path);
    if (first.kind !== "Opened") throw new Error("expected the file to open");
    // The job writes its last line exactly when the end is observed: after the reader hit
    // EOF, before the stream decides to stop.
    const target = {
      path: () => path,
      ended: () => {
        appendFileSync(path, "at the end\n");
        return true;
      },
    };
    const stream = logStream(target, first, {
      follow: true,
      pollMs: 1,
      sleep: async () => {},
      startOffset: async () => 0,
    });
    expect(await new Response(stream).text()).toBe("before\nat the end\n");
  });

  test("a stream cancelled before its first read closes the file opened for it", async () => {
    const h = make();
    const path = `${h.dir}/early.log`;
    writeFileSync(path, "never read\n");
    const first = await openLog(path);
    if (first.kind !== "Opened") throw new Error("expected the file to open");
    const stream = logStream({ path: () => path, ended: () => true }, first, {
      follow: false,
      pollMs: 1,
      sleep: async () => {},
      startOffset: async () => 0,
    });
    await stream.cancel();
    // A closed FileHandle reports fd -1; an open one would live until garbage collection.
    expect(first.handle.fd).toBe(-1);
  });
});

describe("a job array's logs, one per element", () => {
  /** An array workload of `size` elements with its first attempt RUNNING. */
  async function arrayWorkload(h: Harness, size: number) {
    const id = await submit(h);
    // What admission stores for `array: size` (the harness's profiles run no arrays).
    h.store.db.$client.run("UPDATE workloads SET spec_json = json_set(spec_json, '$.array', ?)", [
      size,
    ]);
    return { id, ...attempt(h, id, 1) };
  }

  test("?index=K reads element K's log; the index is required and must be an element", async () => {
    const h = make();
    const a = await arrayWorkload(h, 3);
    writeFileSync(`${a.stdout}.1`, "one\n");
    writeFileSync(`${a.stdout}.2`, "two\n");
    const one = await h.request(`/v1/workloads/${a.id}/logs?index=1`);
    expect([one.status, await one.text()]).toEqual([200, "one\n"]);
    for (const query of ["", "?index=3"]) {
      const refused = await h.request(`/v1/workloads/${a.id}/logs${query}`);
      expect(refused.status).toBe(400);
      expect(JSON.stringify(await refused.json())).toContain("job array of 3 elements");
    }
    const command = createLogsCommand(runtimeFor(h));
    const io = captureIo();
    expect(await command.run([a.id, "--index", "2"], io)).toBe(0);
    expect(io.out()).toBe("two\n");
  });

  test("a hostile index (negative, fractional, a path, exponent, hex, huge) is a 400 naming index", async () => {
    const h = make();
    const a = await arrayWorkload(h, 3);
    writeFileSync(`${a.stdout}.1`, "one\n");
    const hostile = [
      "-1",
      "1.5",
      "..%2Fstdout.log",
      "1%2F..",
      "1e0",
      "0x1",
      "%201",
      "1%00",
      "99999999999999999",
    ];
    for (const index of hostile) {
      const refused = await h.request(`/v1/workloads/${a.id}/logs?index=${index}`);
      expect([index, refused.status]).toEqual([index, 400]);
      const body = (await refused.json()) as { errors?: readonly { path?: string }[] };
      expect([index, body.errors?.map((e) => e.path)]).toEqual([index, ["index"]]);
    }
  });

  test("a job's hard link to a host file in place of an element's log is refused, never read", async () => {
    // Where fs.protected_hardlinks is off, an owner's job (its allocation directory is the
    // owner's) can hard-link a file only root may read; the daemon reads logs as root.
    const h = make();
    const a = await arrayWorkload(h, 2);
    const secret = `${h.dir}/signing-key-like`;
    writeFileSync(secret, "TOP SECRET\n", { mode: 0o600 });
    linkSync(secret, `${a.stdout}.1`);
    const viaLink = await h.request(`/v1/workloads/${a.id}/logs?index=1`);
    expect(viaLink.status).toBe(404);
    expect((await problemOf(viaLink)).detail).toContain("not a regular file");
  });

  test("a workload that is no array refuses an index", async () => {
    const h = make();
    const id = await submit(h);
    attempt(h, id, 1);
    const refused = await h.request(`/v1/workloads/${id}/logs?index=0`);
    expect(refused.status).toBe(400);
    expect(JSON.stringify(await refused.json())).toContain("is not a job array");
  });
});
