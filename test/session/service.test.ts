import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createSessionAttempts } from "../../src/adapters/spool/session-attempts.ts";
import { SESSION_ATTEMPT_FILE } from "../../src/adapters/spool/session-preparer.ts";
import {
  applyTransition,
  getAllocation,
  getWorkload,
  requestStop,
  setCondition,
} from "../../src/adapters/store-sqlite/index.ts";
import { bindSessionStore } from "../../src/adapters/store-sqlite/stores/session-store.ts";
import { type StateLayout, stateLayout } from "../../src/core/layout.ts";
import {
  createGatewayExpectations,
  createSessionBarrierHooks,
  createSessionService,
} from "../../src/core/session/exec-service.ts";
import { manualTimeline, systemTimers } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { signingKeyFromBytes } from "../../src/wire/credential.ts";
import { eventually } from "../support/eventually.ts";
import { execAnswer, type FakeGateway, fakeGateway } from "../support/fake-gateway.ts";
import {
  loseAttempt,
  newWorkload,
  startAttempt,
  type TestStore,
  testStore,
} from "../support/store-fixtures.ts";

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
    gw.kernelEvents = (code) =>
      code.includes("print") ? [{ type: "stream", name: "stdout", text: "hello\n" }] : [];
    gw.kernel = () => execAnswer("OK", "42");
    const service = createSessionService({
      timers: systemTimers,
      store: bindSessionStore(t.store),
      gateway: gw,
      log: silentLog,
    });
    const streamed: unknown[] = [];
    expect(
      await service.exec(id, "print('hello'); 42", { onOutput: (o) => streamed.push(o) }),
    ).toEqual({
      kind: "Ok",
      status: "OK",
      output: "hello\n42",
      error: null,
      outputs: [
        { type: "stream", name: "stdout", text: "hello\n" },
        { type: "execute_result", data: { "text/plain": "42" } },
      ],
      kernelRestarted: false,
    });
    // The caller saw each output as it came, the final one included.
    expect(streamed).toHaveLength(2);
    const sent = gw.sent.at(-1);
    expect(sent).toMatchObject({
      allocationId: a,
      epoch,
      rank: 0,
      request: { kind: "exec", code: "print('hello'); 42" },
    });
    // Named, so an interrupt for this exec can reach it and no other.
    expect((sent?.request as { cell?: string } | undefined)?.cell).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("a failing cell is the code's ERROR, not the daemon's", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    gw.connect(a, prepared(id, a), 0);
    markReady(id);
    gw.kernel = () => execAnswer("ERROR", null, "ZeroDivisionError: division by zero");
    const service = createSessionService({
      timers: systemTimers,
      store: bindSessionStore(t.store),
      gateway: gw,
      log: silentLog,
    });
    expect(await service.exec(id, "1/0")).toMatchObject({
      kind: "Ok",
      status: "ERROR",
      output: "",
      error: "ZeroDivisionError: division by zero",
      outputs: [
        {
          type: "error",
          ename: "Error",
          evalue: "ZeroDivisionError: division by zero",
          traceback: "ZeroDivisionError: division by zero",
        },
      ],
    });
  });

  test("a plain answer is bounded however many outputs the worker sends, and says so", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    gw.connect(a, prepared(id, a), 0);
    markReady(id);
    const big = "x".repeat(1024 * 1024);
    gw.kernelEvents = () =>
      Array.from({ length: 40 }, () => ({ type: "display_data", data: { "text/plain": big } }));
    const service = createSessionService({
      timers: systemTimers,
      store: bindSessionStore(t.store),
      gateway: gw,
      log: silentLog,
    });
    const r = await service.exec(id, "1");
    if (r.kind !== "Ok") throw new Error(r.kind);
    const displays = r.outputs.filter((o) => o.type === "display_data");
    expect(displays.length).toBeGreaterThan(10);
    expect(displays.length).toBeLessThan(17);
    expect(r.outputs.at(-2)).toMatchObject({ type: "stream", name: "stderr" });
    expect(JSON.stringify(r.outputs.at(-2))).toContain("outputs not shown");
  });

  test("a dead kernel does not block the exec that restarts it; other not-READY reasons do", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    gw.connect(a, prepared(id, a), 0);
    const service = createSessionService({
      timers: systemTimers,
      store: bindSessionStore(t.store),
      gateway: gw,
      log: silentLog,
    });
    setCondition(t.store, id, {
      type: "KERNEL_RESPONSIVE",
      status: "FALSE",
      reason: "KERNEL_DIED",
      message: "the Python kernel died (exit code 1)",
    });
    setCondition(t.store, id, {
      type: "READY",
      status: "FALSE",
      reason: "KERNEL_RESPONSIVE",
      message: "KERNEL_RESPONSIVE is FALSE",
    });
    gw.kernel = () => execAnswer("OK", "1", null, true);
    expect(await service.exec(id, "1")).toMatchObject({ kind: "Ok", kernelRestarted: true });
    setCondition(t.store, id, {
      type: "KERNEL_RESPONSIVE",
      status: "FALSE",
      reason: "KERNEL_UNRESPONSIVE",
      message: "1+1 was not evaluated",
    });
    expect((await service.exec(id, "1")).kind).toBe("NotReady");
  });

  test("interrupt reaches rank 0's running cell; not READY or unknown, nothing is sent", async () => {
    const service = createSessionService({
      timers: systemTimers,
      store: bindSessionStore(t.store),
      gateway: gw,
      log: silentLog,
    });
    expect(await service.interrupt("nope")).toEqual({ kind: "NotFound" });
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const epoch = prepared(id, a);
    gw.connect(a, epoch, 0);
    expect((await service.interrupt(id)).kind).toBe("NotReady");
    expect(gw.sent).toEqual([]);
    markReady(id);
    expect(await service.interrupt(id)).toEqual({ kind: "Ok", interrupted: false });
    expect(gw.sent.at(-1)).toEqual({
      allocationId: a,
      epoch,
      rank: 0,
      request: { kind: "interrupt", restartAfterMs: 10_000 },
    });
  });

  test("a cell past its timeoutSeconds is interrupted (escalating) and answered with its output and CellTimeout", async () => {
    const timeline = manualTimeline();
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    gw.connect(a, prepared(id, a), 0);
    markReady(id);
    let answer: (r: ReturnType<typeof execAnswer>) => void = () => {};
    let emit: (text: string) => void = () => {};
    const real = gw.request.bind(gw);
    gw.request = ((...args: Parameters<typeof real>) => {
      if (args[3].kind !== "exec") return real(...args);
      gw.sent.push({ allocationId: args[0], epoch: args[1], rank: args[2], request: args[3] });
      emit = (text) => args[5]?.onEvent?.({ type: "stream", name: "stdout", text });
      return new Promise((resolve) => {
        answer = (response) => resolve({ kind: "Answered", response } as never);
      });
    }) as typeof gw.request;
    const service = createSessionService({
      store: bindSessionStore(t.store),
      gateway: gw,
      log: silentLog,
      interruptGraceMs: 3000,
      timers: timeline,
    });
    const running = service.exec(id, "while True: pass", { timeoutSeconds: 5 });
    const cell = (gw.sent.at(-1)?.request as { cell?: string } | undefined)?.cell;
    emit("step 1\n");
    timeline.advance(4999);
    expect(gw.sent.some((r) => r.request.kind === "interrupt")).toBe(false);
    timeline.advance(1);
    await eventually(() => gw.sent.some((r) => r.request.kind === "interrupt"), {
      timeoutMs: 5000,
    });
    expect(gw.sent.find((r) => r.request.kind === "interrupt")?.request).toEqual({
      kind: "interrupt",
      cell,
      restartAfterMs: 3000,
    });
    answer(execAnswer("ERROR", null, "KeyboardInterrupt"));
    const outcome = await running;
    if (outcome.kind !== "Ok") throw new Error(`not answered: ${JSON.stringify(outcome)}`);
    expect(outcome.status).toBe("ERROR");
    expect(outcome.output).toBe("step 1\n");
    const last = outcome.outputs.at(-1);
    expect(last).toMatchObject({ type: "error", ename: "CellTimeout" });
    expect(last?.type === "error" && last.evalue).toContain("timeoutSeconds (5 s)");
    expect(timeline.pending()).toBe(0);
  });

  test("without timeoutSeconds a cell has no limit of its own: nothing interrupts it", async () => {
    const timeline = manualTimeline();
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    gw.connect(a, prepared(id, a), 0);
    markReady(id);
    const service = createSessionService({
      store: bindSessionStore(t.store),
      gateway: gw,
      log: silentLog,
      timers: timeline,
    });
    expect((await service.exec(id, "1")).kind).toBe("Ok");
    expect(timeline.pending()).toBe(0);
    expect(gw.sent.some((r) => r.request.kind === "interrupt")).toBe(false);
  });

  test("restart asks rank 0's worker for a fresh kernel; not READY, nothing is sent", async () => {
    const service = createSessionService({
      timers: systemTimers,
      store: bindSessionStore(t.store),
      gateway: gw,
      log: silentLog,
    });
    expect(await service.restart("nope")).toEqual({ kind: "NotFound" });
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const epoch = prepared(id, a);
    gw.connect(a, epoch, 0);
    expect((await service.restart(id)).kind).toBe("NotReady");
    expect(gw.sent).toEqual([]);
    markReady(id);
    expect(await service.restart(id)).toMatchObject({ kind: "Ok", running: true });
    expect(gw.sent.at(-1)).toEqual({
      allocationId: a,
      epoch,
      rank: 0,
      request: { kind: "restart" },
    });
  });

  test("not READY, unknown, BATCH, stopping, or the worker gone: nothing runs", async () => {
    const service = createSessionService({
      timers: systemTimers,
      store: bindSessionStore(t.store),
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

/** The expectations read only attempt records; the marker (and its key) is not asked. */
const key = signingKeyFromBytes(randomBytes(32));

describe("gateway expectations", () => {
  test("only the current, active, wanted attempt of a SESSION is expected", () => {
    const expectations = createGatewayExpectations({
      store: bindSessionStore(t.store),
      attempts: createSessionAttempts({ layout, key }),
    });
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
    const expectations = createGatewayExpectations({
      store: bindSessionStore(t.store),
      attempts: createSessionAttempts({ layout, key }),
    });
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
