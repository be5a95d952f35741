import { afterEach, describe, expect, test } from "bun:test";
import {
  applyTransition,
  getWorkload,
  mintAttempt,
  setCondition,
} from "../../src/adapters/store-sqlite/index.ts";
import {
  externalHandle,
  mintSubmissionToken,
  type SubmissionToken,
} from "../../src/core/models.ts";
import type { ObservationTarget, TaskResult } from "../../src/core/ports/allocation-backend.ts";
import type { ExecOutcome, SessionService } from "../../src/core/session/session-port.ts";
import { type Harness, harness, problemOf } from "../support/api-harness.ts";
import { fakeBackend } from "../support/fake-backend.ts";

const open: Harness[] = [];
function make(options: Parameters<typeof harness>[0] = {}): Harness {
  const h = harness(options);
  open.push(h);
  return h;
}
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

const verified = () =>
  fakeBackend({
    capabilities: {
      sessionIsolation: {
        verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }),
      },
    },
  });

async function submit(h: Harness, body: Record<string, unknown> = {}): Promise<string> {
  const res = await h.post("/v1/workloads", {
    kind: "BATCH",
    profile: "default",
    command: ["true"],
    ...body,
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

/** Takes the workload's first attempt to RUNNING with a handle, as the reconciler would. */
function running(h: Harness, workloadId: string): { allocationId: string; token: SubmissionToken } {
  const token = mintSubmissionToken(random);
  const allocationId = `a-${workloadId}`;
  const minted = mintAttempt(h.store, {
    workloadId,
    allocationId,
    token,
    expectedEpoch: 0,
    message: "submitting",
  });
  expect(minted.kind).toBe("Minted");
  h.clock.advance(1000);
  expect(
    applyTransition(h.store, {
      allocation: {
        id: allocationId,
        expectedPhase: "SUBMITTING",
        phase: "RUNNING",
        reason: "STARTED",
        message: "started",
        handle: externalHandle("4242"),
        submittedAt: h.clock.now(),
        startedAt: h.clock.now(),
      },
      workload: {
        id: workloadId,
        expectedPhase: "SUBMITTING",
        expectedEpoch: 1,
        phase: "RUNNING",
        reason: "STARTED",
        message: "started",
      },
    }),
  ).toBe(true);
  return { allocationId, token };
}

describe("GET /v1/workloads/{id} and events", () => {
  test("the workload with its allocations; unknown id is a 404 problem", async () => {
    const h = make();
    const id = await submit(h);
    const { allocationId } = running(h, id);
    const res = await h.request(`/v1/workloads/${id}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body["phase"]).toBe("RUNNING");
    expect(body["executionEpoch"]).toBe(1);
    expect(body["allocations"]).toEqual([
      {
        id: allocationId,
        epoch: 1,
        phase: "RUNNING",
        reason: "STARTED",
        submittedAt: new Date(h.clock.now()).toISOString(),
        startedAt: new Date(h.clock.now()).toISOString(),
        endedAt: null,
        deadline: null,
        // What an admin matches against the backend's own tools (issue 21).
        backendJobId: "4242",
        array: null,
      },
    ]);
    // No time limit reported by the backend: no TIME_REMAINING.
    expect(body["deadline"]).toBeNull();
    expect(body["timeRemainingSeconds"]).toBeNull();
    // No reconciler here heard the backend: a RUNNING phase nobody confirmed says so.
    expect(body["phaseConfirmedAt"]).toBeNull();
    // The submission token stays inside the daemon.
    const text = JSON.stringify(body);
    expect(text).not.toContain("o4s-");

    const missing = await h.request("/v1/workloads/w-nope");
    expect(missing.status).toBe(404);
    expect((await problemOf(missing)).detail).toContain("w-nope");
  });

  test("stored conditions replace the UNKNOWN placeholders", async () => {
    const h = make({ backend: verified() });
    const res = await h.post("/v1/workloads", { kind: "SESSION", profile: "interactive" });
    const id = ((await res.json()) as { id: string }).id;
    setCondition(h.store, id, {
      type: "WORKER_CONNECTED",
      status: "TRUE",
      reason: "WORKER_CONNECTED",
      message: "rank 0",
    });
    const body = (await (await h.request(`/v1/workloads/${id}`)).json()) as {
      conditions: { type: string; status: string; message: string }[];
    };
    expect(body.conditions.find((c) => c.type === "WORKER_CONNECTED")).toMatchObject({
      status: "TRUE",
      message: "rank 0",
    });
    expect(body.conditions).toHaveLength(6);
  });

  test("events are the transitions, oldest first", async () => {
    const h = make();
    const id = await submit(h);
    running(h, id);
    const res = await h.request(`/v1/workloads/${id}/events`);
    expect(res.status).toBe(200);
    const events = (await res.json()) as { phase: string; at: string }[];
    expect(Array.isArray(events)).toBe(true);
    expect(events.map((e) => e.phase)).toEqual(["PENDING", "SUBMITTING", "RUNNING"]);
    expect(Object.keys(events[0] ?? {}).sort()).toEqual(["at", "message", "phase", "reason"]);
    expect((await h.request("/v1/workloads/w-nope/events")).status).toBe(404);
  });
});

describe("GET /v1/workloads", () => {
  test("newest first, paginated by an opaque cursor, filtered by kind and phase", async () => {
    const h = make({ backend: verified() });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(await submit(h, { name: `job${i}` }));
      h.clock.advance(10);
    }
    const res = await h.post("/v1/workloads", { kind: "SESSION", profile: "interactive" });
    const sessionId = ((await res.json()) as { id: string }).id;
    running(h, ids[0] as string);

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = cursor ? `&cursor=${cursor}` : "";
      const page = (await (await h.request(`/v1/workloads?limit=2${q}`)).json()) as {
        items: { id: string }[];
        nextCursor: string | null;
      };
      seen.push(...page.items.map((i) => i.id));
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor !== null);
    expect(pages).toBe(3);
    expect(seen).toEqual([sessionId, ...ids.slice().reverse()]);

    const batches = (await (await h.request("/v1/workloads?kind=BATCH")).json()) as {
      items: unknown[];
    };
    expect(batches.items).toHaveLength(5);
    const runningOnes = (await (await h.request("/v1/workloads?phase=RUNNING")).json()) as {
      items: { id: string }[];
      nextCursor: string | null;
    };
    expect(runningOnes.items.map((i) => i.id)).toEqual([ids[0] as string]);
    expect(runningOnes.nextCursor).toBeNull();
  });

  test("?backendJobId= finds the workload whose attempt holds that backend job", async () => {
    const h = make();
    const ids = [await submit(h), await submit(h)];
    running(h, ids[1] as string);
    const page = async (q: string) =>
      ((await (await h.request(`/v1/workloads?${q}`)).json()) as { items: { id: string }[] }).items;
    expect((await page("backendJobId=4242")).map((i) => i.id)).toEqual([ids[1] as string]);
    expect(await page("backendJobId=4243")).toEqual([]);
    // Combined with the other filters, as an admin narrows a search.
    expect((await page("backendJobId=4242&phase=RUNNING")).map((i) => i.id)).toEqual([
      ids[1] as string,
    ]);
    expect(await page("backendJobId=4242&phase=QUEUED")).toEqual([]);
  });

  test("phaseConfirmedAt: a backend-held phase shows the reconciler's last confirmation, fresh on every read", async () => {
    const h = make();
    const pending = await submit(h);
    const id = await submit(h);
    const { allocationId } = running(h, id);
    const confirmedOf = async (workloadId: string) => {
      const shown = (await (await h.request(`/v1/workloads/${workloadId}`)).json()) as {
        phaseConfirmedAt: string | null;
      };
      const listed = (await (await h.request("/v1/workloads")).json()) as {
        items: { id: string; phaseConfirmedAt: string | null }[];
      };
      const item = listed.items.find((i) => i.id === workloadId);
      expect(item?.phaseConfirmedAt).toBe(shown.phaseConfirmedAt);
      return shown.phaseConfirmedAt;
    };
    // RUNNING, and no reconciler of this process heard the backend say so: null.
    expect(await confirmedOf(id)).toBeNull();
    // Heard, with no store write in between: the cached view still answers it.
    h.confirmed.set(allocationId, h.clock.now() + 5_000);
    expect(await confirmedOf(id)).toBe(new Date(h.clock.now() + 5_000).toISOString());
    h.confirmed.set(allocationId, h.clock.now() + 9_000);
    expect(await confirmedOf(id)).toBe(new Date(h.clock.now() + 9_000).toISOString());
    // PENDING is the daemon's own phase: confirmed when it was written.
    const row = getWorkload(h.store, pending);
    expect(await confirmedOf(pending)).toBe(new Date(row?.updatedAt ?? 0).toISOString());
  });

  test("empty parameters (?kind=&phase=&limit=&cursor=) mean not given", async () => {
    const h = make();
    await submit(h);
    const res = await h.request("/v1/workloads?kind=&phase=&limit=&cursor=");
    expect(res.status).toBe(200);
    const page = (await res.json()) as { items: unknown[]; nextCursor: string | null };
    expect(page.items).toHaveLength(1);
    expect(page.nextCursor).toBeNull();
  });

  test.each([
    ["limit=0", "limit"],
    ["limit=501", "limit"],
    ["limit=ten", "limit"],
    ["kind=CRON", "kind"],
    ["phase=DONE", "phase"],
    ["backendJobId=a%20b", "backendJobId"],
    ["backendJobId=1%2C2", "backendJobId"],
    ["cursor=not-a-cursor", "cursor"],
    [`cursor=${Buffer.from("123.w-x").toString("base64url")}x`, "cursor"],
    ["sort=asc", "sort"],
  ])("?%s is a 400 naming %s", async (query, path) => {
    const h = make();
    const res = await h.request(`/v1/workloads?${query}`);
    expect(res.status).toBe(400);
    expect((await problemOf(res)).errors.map((e) => e.path)).toContain(path);
  });
});

describe("POST /v1/workloads/{id}/cancel", () => {
  test("202, records the stop intent once, wakes the reconciler; idempotent", async () => {
    const h = make();
    const id = await submit(h);
    const wakesBefore = h.wakes.count;
    const first = await h.post(`/v1/workloads/${id}/cancel`, {});
    expect(first.status).toBe(202);
    expect(((await first.json()) as { id: string }).id).toBe(id);
    expect(getWorkload(h.store, id)?.desired).toEqual({
      kind: "STOP",
      reason: "USER_CANCELLED",
      message: "cancelled by the user",
    });
    expect(h.wakes.count).toBe(wakesBefore + 1);
    const second = await h.request(`/v1/workloads/${id}/cancel`, { method: "POST" });
    expect(second.status).toBe(202);
    expect(getWorkload(h.store, id)?.desired.kind).toBe("STOP");
  });

  test("unknown id: 404", async () => {
    const h = make();
    const res = await h.request("/v1/workloads/w-nope/cancel", { method: "POST" });
    expect(res.status).toBe(404);
  });
});

describe("POST /v1/workloads/{id}/exec", () => {
  async function session(h: Harness): Promise<string> {
    const res = await h.post("/v1/workloads", { kind: "SESSION", profile: "interactive" });
    return ((await res.json()) as { id: string }).id;
  }

  function sessions(outcome: ExecOutcome): SessionService & { calls: [string, string][] } {
    const calls: [string, string][] = [];
    return {
      calls,
      exec: async (id, code) => {
        calls.push([id, code]);
        return outcome;
      },
      interrupt: async () => ({ kind: "Ok", interrupted: false }),
      restart: async () => ({ kind: "Ok", running: true, message: "the interpreter is running" }),
    };
  }

  test("without a sessions engine: 409 naming it", async () => {
    const h = make({ backend: verified() });
    const id = await session(h);
    const res = await h.post(`/v1/workloads/${id}/exec`, { code: "1+1" });
    expect(res.status).toBe(409);
    expect((await problemOf(res)).detail).toBe("sessions are not enabled on this daemon");
  });

  test("OK: the kernel's answer, and lastActiveAt moves", async () => {
    const service = sessions({
      kind: "Ok",
      status: "OK",
      output: "2\n",
      error: null,
      outputs: [{ type: "stream", name: "stdout", text: "2\n" }],
      kernelRestarted: false,
    });
    const h = make({ backend: verified(), sessions: service });
    const id = await session(h);
    const createdActive = getWorkload(h.store, id)?.lastActiveAt;
    h.clock.advance(60_000);
    const res = await h.post(`/v1/workloads/${id}/exec`, { code: "1+1" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      status: "OK",
      output: "2\n",
      error: null,
      outputs: [{ type: "stream", name: "stdout", text: "2\n" }],
      kernelRestarted: false,
      cell: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    expect(service.calls).toEqual([[id, "1+1"]]);
    expect(getWorkload(h.store, id)?.lastActiveAt).toBe((createdActive ?? 0) + 60_000);
  });

  test("ERROR from the code is still a 200 carrying the error", async () => {
    const h = make({
      backend: verified(),
      sessions: sessions({
        kind: "Ok",
        status: "ERROR",
        output: "",
        error: "ZeroDivisionError",
        outputs: [],
        kernelRestarted: false,
      }),
    });
    const id = await session(h);
    const res = await h.post(`/v1/workloads/${id}/exec`, { code: "1/0" });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { status: string }).status).toBe("ERROR");
  });

  test("not ready: 409 with the engine's message; unknown session: 404", async () => {
    const h1 = make({
      backend: verified(),
      sessions: sessions({ kind: "NotReady", message: "READY is FALSE: WORKER_MISSING" }),
    });
    const id1 = await session(h1);
    const r1 = await h1.post(`/v1/workloads/${id1}/exec`, { code: "x" });
    expect(r1.status).toBe(409);
    expect((await problemOf(r1)).detail).toContain("WORKER_MISSING");

    const h2 = make({ backend: verified(), sessions: sessions({ kind: "NotFound" }) });
    const id2 = await session(h2);
    expect((await h2.post(`/v1/workloads/${id2}/exec`, { code: "x" })).status).toBe(404);
  });

  test("streaming: SSE events as the service produces them, ending with the result", async () => {
    const h = make({
      backend: verified(),
      sessions: {
        async exec(_id, _code, options) {
          options?.onStart?.();
          options?.onOutput?.({ type: "stream", name: "stdout", text: "hi\n" });
          options?.onOutput?.({ type: "display_data", data: { "text/plain": "<Figure>" } });
          options?.onOutput?.({ type: "error", ename: "E", evalue: "v", traceback: "tb" });
          return {
            kind: "Ok",
            status: "ERROR",
            output: "hi\n",
            error: "tb",
            outputs: [{ type: "error", ename: "E", evalue: "v", traceback: "tb" }],
            kernelRestarted: true,
          };
        },
        interrupt: async () => ({ kind: "Ok", interrupted: true }),
        restart: async () => ({ kind: "Ok", running: true, message: "the interpreter is running" }),
      },
    });
    const id = await session(h);
    for (const [path, headers] of [
      [`/v1/workloads/${id}/exec?stream=1`, {}],
      [`/v1/workloads/${id}/exec?stream=true`, {}],
      [`/v1/workloads/${id}/exec`, { Accept: "text/event-stream" }],
    ] as const) {
      const res = await h.post(path, { code: "x" }, headers);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("text/event-stream");
      const text = await res.text();
      const cell = /"cell":"([0-9a-f-]{36})"/.exec(text)?.[1];
      expect(text).toBe(
        [
          `id: 1\nevent: stdout\ndata: {"text":"hi\\n","cell":"${cell}"}\n\n`,
          `id: 2\nevent: display\ndata: {"data":{"text/plain":"<Figure>"},"cell":"${cell}"}\n\n`,
          `id: 3\nevent: error\ndata: {"status":"ERROR","ename":"E","evalue":"v","traceback":"tb","kernelRestarted":true,"cell":"${cell}"}\n\n`,
        ].join(""),
      );
      // The same events again by the cell's id, after the last one a client saw: from the
      // query, or from Last-Event-ID as an EventSource sends it when it reconnects.
      const again = await h.request(`/v1/workloads/${id}/cells/${cell}/events?after=1`);
      expect(again.status).toBe(200);
      expect(await again.text()).toBe(text.slice(text.indexOf("id: 2\n")));
      const resumed = await h.request(`/v1/workloads/${id}/cells/${cell}/events`, {
        headers: { "Last-Event-ID": "2" },
      });
      expect(await resumed.text()).toBe(text.slice(text.indexOf("id: 3\n")));
    }
    expect((await h.request(`/v1/workloads/${id}/cells/nope/events`)).status).toBe(404);
    expect((await h.request(`/v1/workloads/${id}/cells/nope/events?after=-1`)).status).toBe(400);
    const interrupted = await h.post(`/v1/workloads/${id}/interrupt`, {});
    expect(await interrupted.json()).toEqual({ interrupted: true });
  });

  test("streaming: a session that is not READY still answers 409 problem+json, not a stream", async () => {
    const h = make({
      backend: verified(),
      sessions: sessions({ kind: "NotReady", message: "READY is FALSE: WORKER_MISSING" }),
    });
    const id = await session(h);
    const res = await h.post(`/v1/workloads/${id}/exec?stream=1`, { code: "x" });
    expect(res.status).toBe(409);
    expect(res.headers.get("content-type")).toContain("application/problem+json");
    const batch = await submit(h);
    expect((await h.post(`/v1/workloads/${batch}/interrupt`, {})).status).toBe(409);
  });

  test("a BATCH is not a session; a bad body is a 400; an unknown id a 404", async () => {
    const service = sessions({
      kind: "Ok",
      status: "OK",
      output: "",
      error: null,
      outputs: [],
      kernelRestarted: false,
    });
    const h = make({ backend: verified(), sessions: service });
    const id = await submit(h);
    expect((await h.post(`/v1/workloads/${id}/exec`, { code: "x" })).status).toBe(409);
    const sid = await session(h);
    const bad = await h.post(`/v1/workloads/${sid}/exec`, { code: "x", timeout: 3 });
    expect(bad.status).toBe(400);
    expect((await problemOf(bad)).errors.map((e) => e.path)).toEqual(["timeout"]);
    const missing = await h.post(`/v1/workloads/${sid}/exec`, { kode: "x" });
    expect((await problemOf(missing)).errors.map((e) => e.path).sort()).toEqual(["code", "kode"]);
    expect((await h.post("/v1/workloads/w-nope/exec", { code: "x" })).status).toBe(404);
    expect(service.calls).toEqual([]);
  });
});

describe("POST /v1/workloads/{id}/tasks", () => {
  function runner(result: TaskResult) {
    const calls: { target: ObservationTarget; command: readonly string[]; timeoutMs: number }[] =
      [];
    const backend = fakeBackend({
      capabilities: {
        tasks: {
          runTask: async (
            target: ObservationTarget,
            command: readonly string[],
            options: { timeoutMs: number },
          ) => {
            calls.push({ target, command, timeoutMs: options.timeoutMs });
            return result;
          },
        },
      },
    });
    return { backend, calls };
  }

  test("a backend that cannot run steps: 409, and nothing is submitted", async () => {
    const h = make();
    const id = await submit(h);
    running(h, id);
    const res = await h.post(`/v1/workloads/${id}/tasks`, { command: ["hostname"] });
    expect(res.status).toBe(409);
    expect((await problemOf(res)).detail).toContain("cannot run steps");
  });

  test("no live allocation: 409, never a new submission (INV-4)", async () => {
    const { backend, calls } = runner({ kind: "Completed", exitCode: 0, stdout: "", stderr: "" });
    const h = make({ backend });
    const id = await submit(h);
    const res = await h.post(`/v1/workloads/${id}/tasks`, { command: ["hostname"] });
    expect(res.status).toBe(409);
    expect((await problemOf(res)).type).toBe("urn:openai4s:problem:no-live-allocation");
    expect(calls).toEqual([]);
    expect(backend.calls).toEqual([]);
    expect(h.rows().allocations).toBe(0);
  });

  test("a running allocation: the step runs on its handle and counts as activity", async () => {
    const { backend, calls } = runner({
      kind: "Completed",
      exitCode: 0,
      stdout: "node1\n",
      stderr: "",
    });
    const h = make({ backend });
    const id = await submit(h);
    const { allocationId, token } = running(h, id);
    h.clock.advance(5000);
    const res = await h.post(`/v1/workloads/${id}/tasks`, {
      command: ["hostname"],
      timeoutSeconds: 30,
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ exitCode: 0, stdout: "node1\n", stderr: "" });
    expect(calls).toEqual([
      {
        target: { allocationId, token, handle: externalHandle("4242") },
        command: ["hostname"],
        timeoutMs: 30_000,
      },
    ]);
    expect(getWorkload(h.store, id)?.lastActiveAt).toBe(h.clock.now());
    expect(backend.calls).toEqual([]);
  });

  test("refused by the backend: 409; backend unreachable: 503", async () => {
    for (const [result, status] of [
      [{ kind: "Refused", message: "step limit" }, 409],
      [{ kind: "Unavailable", message: "timeout" }, 503],
    ] as const) {
      const { backend } = runner(result);
      const h = make({ backend });
      const id = await submit(h);
      running(h, id);
      const res = await h.post(`/v1/workloads/${id}/tasks`, { command: ["x"] });
      expect(res.status).toBe(status);
    }
  });

  test("a stopping workload refuses steps; a bad body is a 400", async () => {
    const { backend, calls } = runner({ kind: "Completed", exitCode: 0, stdout: "", stderr: "" });
    const h = make({ backend });
    const id = await submit(h);
    running(h, id);
    const bad = await h.post(`/v1/workloads/${id}/tasks`, { command: "hostname" });
    expect(bad.status).toBe(400);
    expect((await problemOf(bad)).errors[0]?.path).toBe("command");
    await h.post(`/v1/workloads/${id}/cancel`, {});
    expect((await h.post(`/v1/workloads/${id}/tasks`, { command: ["x"] })).status).toBe(409);
    expect(calls).toEqual([]);
  });
});
