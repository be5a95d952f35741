import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { silentLog } from "../../src/log.ts";
import { type StateLayout, stateLayout } from "../../src/orchestration/layout.ts";
import { SESSION_ATTEMPT_FILE } from "../../src/orchestration/session/preparer.ts";
import {
  createGatewayExpectations,
  createSessionBarrierHooks,
  createSessionService,
} from "../../src/orchestration/session/service.ts";
import {
  applyTransition,
  getAllocation,
  getWorkload,
  requestStop,
  setCondition,
} from "../../src/store/index.ts";
import { type FakeGateway, fakeGateway } from "./fake-gateway.ts";
import { loseAttempt, newWorkload, startAttempt, type TestStore, testStore } from "./support.ts";

let t: TestStore;
let layout: StateLayout;
let gw: FakeGateway;
beforeEach(() => {
  t = testStore();
  layout = stateLayout(join(t.dir, "state"));
  gw = fakeGateway();
});
afterEach(() => {
  t.close();
});

function prepared(workloadId: string, allocationId: string, ranks = 1): number {
  const dir = layout.attemptRecordDir(workloadId, allocationId);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, SESSION_ATTEMPT_FILE), JSON.stringify({ ranks }));
  const a = getAllocation(t.store, allocationId);
  if (!a) throw new Error("setup");
  return a.epoch;
}

function markReady(workloadId: string): void {
  setCondition(t.store, workloadId, {
    type: "READY",
    status: "TRUE",
    reason: "READY",
    message: "ready",
  });
}

describe("session service: exec", () => {
  test("runs in rank 0 of the current attempt and shows output, then the value", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const epoch = prepared(id, a);
    gw.connect(a, epoch, 0);
    markReady(id);
    gw.kernel = (code) => ({
      kind: "exec",
      status: "OK",
      output: code.includes("print") ? "hello\n" : "",
      stderr: "",
      value: "42",
      error: null,
    });
    const service = createSessionService({ store: t.store, gateway: gw, log: silentLog });
    expect(await service.exec(id, "print('hello'); 42")).toEqual({
      kind: "Ok",
      status: "OK",
      output: "hello\n42",
      error: null,
    });
    expect(gw.sent.at(-1)).toEqual({
      allocationId: a,
      epoch,
      rank: 0,
      request: { kind: "exec", code: "print('hello'); 42" },
    });
  });

  test("a failing cell is the code's ERROR, not the daemon's", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    gw.connect(a, prepared(id, a), 0);
    markReady(id);
    gw.kernel = () => ({
      kind: "exec",
      status: "ERROR",
      output: "",
      stderr: "",
      value: null,
      error: "ZeroDivisionError: division by zero",
    });
    const service = createSessionService({ store: t.store, gateway: gw, log: silentLog });
    expect(await service.exec(id, "1/0")).toEqual({
      kind: "Ok",
      status: "ERROR",
      output: "",
      error: "ZeroDivisionError: division by zero",
    });
  });

  test("not READY, unknown, BATCH, stopping, or the worker gone: nothing runs", async () => {
    const service = createSessionService({
      store: t.store,
      gateway: gw,
      log: silentLog,
      onWorkerLost: () => lost.push(1),
    });
    const lost: number[] = [];
    expect(await service.exec("nope", "1")).toEqual({ kind: "NotFound" });
    const batch = newWorkload(t.store, "BATCH");
    expect(await service.exec(batch, "1")).toEqual({ kind: "NotFound" });

    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const epoch = prepared(id, a);
    setCondition(t.store, id, {
      type: "READY",
      status: "FALSE",
      reason: "WORKER_CONNECTED",
      message: "waiting for rank 0",
    });
    const notReady = await service.exec(id, "1");
    expect(notReady.kind).toBe("NotReady");
    if (notReady.kind === "NotReady") expect(notReady.message).toContain("WORKER_CONNECTED");

    markReady(id);
    const gone = await service.exec(id, "1"); // READY is stale: the worker is not there
    expect(gone).toEqual({ kind: "NotReady", message: "the session's worker is not connected" });
    expect(lost).toEqual([1]);

    gw.connect(a, epoch, 0);
    requestStop(t.store, id, "IDLE_TIMEOUT", "idle");
    expect((await service.exec(id, "1")).kind).toBe("NotReady");
    expect(gw.sent.filter((s) => s.request.kind === "exec")).toHaveLength(1);
  });
});

describe("gateway expectations", () => {
  test("only the current, active, wanted attempt of a SESSION is expected", () => {
    const expectations = createGatewayExpectations({ store: t.store, layout });
    expect(expectations.lookup("unknown")).toBeNull();

    const batch = newWorkload(t.store, "BATCH");
    const batchAlloc = startAttempt(t.store, batch);
    prepared(batch, batchAlloc);
    expect(expectations.lookup(batchAlloc)).toBeNull();

    const id = newWorkload(t.store);
    const first = startAttempt(t.store, id, { running: false });
    const firstEpoch = prepared(id, first, 2);
    expect(expectations.lookup(first)).toEqual({ epoch: firstEpoch, ranks: 2, fenced: false });
    loseAttempt(t.store, id, first);
    const second = startAttempt(t.store, id);
    const secondEpoch = prepared(id, second, 2);
    // The lost attempt's workers are fenced off; the new epoch is expected.
    expect(expectations.lookup(first)).toEqual({ epoch: firstEpoch, ranks: 2, fenced: true });
    expect(expectations.lookup(second)).toEqual({ epoch: secondEpoch, ranks: 2, fenced: false });

    requestStop(t.store, id, "USER_CANCELLED", "bye");
    expect(expectations.lookup(second)?.fenced).toBe(true);
  });

  test("STOPPING fences, and an attempt never prepared as a session is not expected", () => {
    const expectations = createGatewayExpectations({ store: t.store, layout });
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    expect(expectations.lookup(a)).toBeNull();
    const epoch = prepared(id, a);
    applyTransition(t.store, {
      allocation: {
        id: a,
        expectedPhase: "RUNNING",
        phase: "STOPPING",
        reason: null,
        message: null,
      },
      workload: {
        id,
        expectedPhase: "RUNNING",
        expectedEpoch: epoch,
        phase: "STOPPING",
        reason: null,
        message: null,
      },
    });
    expect(expectations.lookup(a)).toEqual({ epoch, ranks: 1, fenced: true });
  });
});

describe("session barrier hooks", () => {
  function attempt() {
    const id = newWorkload(t.store);
    const aId = startAttempt(t.store, id);
    const epoch = prepared(id, aId);
    const a = getAllocation(t.store, aId);
    const w = getWorkload(t.store, id);
    if (!a || !w) throw new Error("setup");
    return { w, a, epoch };
  }

  test("cancelTasks stops the attempt's workers; drained once none is connected", async () => {
    const { w, a, epoch } = attempt();
    gw.connect(a.id, epoch, 0);
    const hooks = createSessionBarrierHooks({ gateway: gw, clock: t.clock, log: silentLog });
    expect(await hooks.drained(w, a)).toBe(false);
    await hooks.cancelTasks(w, a);
    expect(gw.stops).toEqual([{ allocationId: a.id, epoch }]);
    expect(await hooks.drained(w, a)).toBe(true);
    await hooks.cancelTasks(w, a); // re-entrant
    expect(await hooks.drained(w, a)).toBe(true);
  });

  test("a worker that will not go is given up on after the deadline", async () => {
    const { w, a } = attempt();
    const stubborn = { ...gw, stop: () => 1, connected: () => new Set([0]) };
    const hooks = createSessionBarrierHooks({
      gateway: stubborn,
      clock: t.clock,
      log: silentLog,
      drainDeadlineMs: 5000,
    });
    await hooks.cancelTasks(w, a);
    t.clock.advance(4999);
    await hooks.cancelTasks(w, a); // a re-run of the barrier does not restart the deadline
    expect(await hooks.drained(w, a)).toBe(false);
    t.clock.advance(1);
    expect(await hooks.drained(w, a)).toBe(true);
  });

  test("BATCH workloads pass straight through", async () => {
    const id = newWorkload(t.store, "BATCH");
    const aId = startAttempt(t.store, id);
    const a = getAllocation(t.store, aId);
    const w = getWorkload(t.store, id);
    if (!a || !w) throw new Error("setup");
    const hooks = createSessionBarrierHooks({ gateway: gw, clock: t.clock, log: silentLog });
    await hooks.cancelTasks(w, a);
    expect(gw.stops).toEqual([]);
    expect(await hooks.drained(w, a)).toBe(true);
  });
});
