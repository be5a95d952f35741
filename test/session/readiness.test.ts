import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createSessionAttempts } from "../../src/adapters/spool/session-attempts.ts";
import {
  SESSION_ATTEMPT_FILE,
  workspaceMarker,
  workspaceMarkerPath,
} from "../../src/adapters/spool/session-preparer.ts";
import {
  applyTransition,
  getAllocation,
  listConditions,
  requestStop,
  setCondition,
} from "../../src/adapters/store-sqlite/index.ts";
import { bindSessionStore } from "../../src/adapters/store-sqlite/stores/session-store.ts";
import { type StateLayout, stateLayout } from "../../src/core/layout.ts";
import type { ConditionType } from "../../src/core/models.ts";
import { createSessionReadiness } from "../../src/core/session/readiness.ts";
import { readyCondition } from "../../src/core/session/readiness-conditions.ts";
import { manualTimeline, systemTimers, type Timers } from "../../src/lib/clock.ts";
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
const key = signingKeyFromBytes(randomBytes(32));

beforeEach(() => {
  t = testStore();
  layout = stateLayout(join(t.dir, "state"));
  gw = fakeGateway();
});
afterEach(() => {
  t.close();
});

function readiness() {
  return createSessionReadiness({
    timers: systemTimers,
    store: bindSessionStore(t.store),
    gateway: gw,
    attempts: createSessionAttempts({ layout, key }),
    clock: t.clock,
    log: silentLog,
  });
}

/** What the preparer leaves behind for an attempt (marker and rank count). */
function prepared(workloadId: string, allocationId: string, ranks = 1): { epoch: number } {
  const a = getAllocation(t.store, allocationId);
  if (!a) throw new Error("no allocation");
  const allocationDir = layout.attemptRecordDir(workloadId, allocationId);
  mkdirSync(allocationDir, { recursive: true });
  mkdirSync(layout.workspaceDir(workloadId), { recursive: true });
  writeFileSync(join(allocationDir, SESSION_ATTEMPT_FILE), JSON.stringify({ ranks }));
  writeFileSync(
    workspaceMarkerPath(layout.workspaceDir(workloadId)),
    workspaceMarker(key, a.id, a.epoch),
  );
  return { epoch: a.epoch };
}

function conditions(
  workloadId: string,
): Record<string, { status: string; reason: string; message: string }> {
  const out: Record<string, { status: string; reason: string; message: string }> = {};
  for (const c of listConditions(t.store, workloadId)) {
    out[c.type] = { status: c.status, reason: c.reason, message: c.message };
  }
  return out;
}

function statuses(workloadId: string): Partial<Record<ConditionType, string>> {
  const c = conditions(workloadId);
  return Object.fromEntries(Object.entries(c).map(([k, v]) => [k, v.status]));
}

describe("readiness conditions", () => {
  test("a queued session: ALLOCATION_RUNNING is missing, and READY says so", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id, { running: false });
    prepared(id, a);
    await readiness().evaluateOnce();
    const c = conditions(id);
    expect(c["ALLOCATION_RUNNING"]).toMatchObject({
      status: "FALSE",
      reason: "ALLOCATION_NOT_RUNNING",
    });
    expect(c["ALLOCATION_RUNNING"]?.message).toContain("QUEUED");
    expect(c["READY"]).toMatchObject({ status: "FALSE", reason: "ALLOCATION_RUNNING" });
    expect(Object.keys(c).sort()).toEqual(
      [
        "ALLOCATION_RUNNING",
        "KERNEL_RESPONSIVE",
        "READY",
        "WORKER_CONNECTED",
        "WORKSPACE_VISIBLE",
      ].sort(),
    );
  });

  test("running, worker held back: WORKER_CONNECTED is the missing one", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    prepared(id, a);
    await readiness().evaluateOnce();
    const c = conditions(id);
    expect(c["ALLOCATION_RUNNING"]?.status).toBe("TRUE");
    expect(c["WORKER_CONNECTED"]).toMatchObject({ status: "FALSE", reason: "WORKER_MISSING" });
    expect(c["WORKSPACE_VISIBLE"]?.status).toBe("UNKNOWN");
    expect(c["READY"]).toMatchObject({ status: "FALSE", reason: "WORKER_CONNECTED" });
    expect(gw.sent).toEqual([]); // nothing is probed before every worker is there
  });

  test("gang readiness: every rank of the CURRENT epoch, and a previous epoch's rank does not count", async () => {
    const id = newWorkload(t.store);
    const first = startAttempt(t.store, id);
    const { epoch: oldEpoch } = prepared(id, first, 2);
    loseAttempt(t.store, id, first);
    const second = startAttempt(t.store, id);
    const { epoch } = prepared(id, second, 2);
    const r = readiness();
    gw.connect(second, epoch, 0);
    gw.connect(first, oldEpoch, 1); // a latecomer of the lost attempt
    await r.evaluateOnce();
    expect(conditions(id)["WORKER_CONNECTED"]).toEqual({
      status: "FALSE",
      reason: "WORKER_MISSING",
      message: `1 of 2 workers of epoch ${epoch} connected; waiting for rank 1`,
    });
    expect(conditions(id)["READY"]?.reason).toBe("WORKER_CONNECTED");
    gw.connect(second, epoch, 1);
    await r.evaluateOnce();
    expect(statuses(id)).toEqual({
      ALLOCATION_RUNNING: "TRUE",
      WORKER_CONNECTED: "TRUE",
      WORKSPACE_VISIBLE: "TRUE",
      KERNEL_RESPONSIVE: "TRUE",
      READY: "TRUE",
    });
    // Both ranks were asked to read the marker; the kernel probe went to rank 0.
    expect(gw.sent.map((s) => [s.request.kind, s.rank, s.epoch])).toEqual([
      ["probe_workspace", 0, epoch],
      ["probe_workspace", 1, epoch],
      ["exec", 0, epoch],
    ]);
  });

  test("a worker that does not see the workspace: WORKSPACE_VISIBLE is missing", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const { epoch } = prepared(id, a);
    gw.connect(a, epoch, 0);
    gw.workspaceView = (p) => `${p}.elsewhere`;
    const r = readiness();
    await r.evaluateOnce();
    expect(conditions(id)["WORKSPACE_VISIBLE"]).toMatchObject({
      status: "FALSE",
      reason: "WORKSPACE_NOT_VISIBLE",
    });
    expect(conditions(id)["WORKSPACE_VISIBLE"]?.message).toContain("cannot read");
    expect(conditions(id)["READY"]?.reason).toBe("WORKSPACE_VISIBLE");
    // A wrong marker (another attempt's workspace state) is not the marker.
    gw.workspaceView = (p) => p;
    writeFileSync(workspaceMarkerPath(layout.workspaceDir(id)), "a-previous-attempt");
    await r.evaluateOnce();
    // A failed probe is retried after a pause, not on every pass.
    expect(conditions(id)["WORKSPACE_VISIBLE"]?.message).toContain("cannot read");
    t.clock.advance(1000);
    await r.evaluateOnce();
    expect(conditions(id)["WORKSPACE_VISIBLE"]?.message).toContain("different marker");
    writeFileSync(workspaceMarkerPath(layout.workspaceDir(id)), workspaceMarker(key, a, epoch));
    t.clock.advance(1000);
    await r.evaluateOnce();
    expect(conditions(id)["READY"]?.status).toBe("TRUE");
  });

  test("a kernel that does not compute 1+1 = 2: KERNEL_RESPONSIVE is missing", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const { epoch } = prepared(id, a);
    gw.connect(a, epoch, 0);
    gw.kernel = () => "timeout";
    const r = readiness();
    await r.evaluateOnce();
    expect(conditions(id)["KERNEL_RESPONSIVE"]).toMatchObject({
      status: "FALSE",
      reason: "KERNEL_UNRESPONSIVE",
      message: "1+1 was not evaluated: no answer in time",
    });
    expect(conditions(id)["READY"]?.reason).toBe("KERNEL_RESPONSIVE");
    gw.kernel = () => execAnswer("OK", "3");
    t.clock.advance(1000);
    await r.evaluateOnce();
    expect(conditions(id)["KERNEL_RESPONSIVE"]?.message).toContain('"3"');
    // Only the failing probe is repeated: the workspace was confirmed once.
    expect(gw.sent.map((x) => x.request.kind)).toEqual(["probe_workspace", "exec", "exec"]);
  });

  test("probes run once per attempt, not every pass; a reconnect probes again", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const { epoch } = prepared(id, a);
    gw.connect(a, epoch, 0);
    const r = readiness();
    for (let i = 0; i < 5; i++) await r.evaluateOnce();
    expect(gw.sent.map((s) => s.request.kind)).toEqual(["probe_workspace", "exec"]);
    gw.disconnect(a, epoch, 0);
    await r.evaluateOnce();
    expect(conditions(id)["READY"]).toMatchObject({ status: "FALSE", reason: "WORKER_CONNECTED" });
    gw.connect(a, epoch, 0);
    await r.evaluateOnce();
    expect(conditions(id)["READY"]?.status).toBe("TRUE");
    expect(gw.sent.map((s) => s.request.kind)).toEqual([
      "probe_workspace",
      "exec",
      "probe_workspace",
      "exec",
    ]);
  });

  test("READY keeps its lastTransitionTime while it stays true", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const { epoch } = prepared(id, a);
    gw.connect(a, epoch, 0);
    const r = readiness();
    await r.evaluateOnce();
    const at = listConditions(t.store, id).find((c) => c.type === "READY")?.lastTransitionTime;
    t.clock.advance(60_000);
    await r.evaluateOnce();
    expect(listConditions(t.store, id).find((c) => c.type === "READY")?.lastTransitionTime).toBe(
      at,
    );
  });

  test("a session asked to stop is not probed", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const { epoch } = prepared(id, a);
    gw.connect(a, epoch, 0);
    requestStop(t.store, id, "USER_CANCELLED", "bye");
    await readiness().evaluateOnce();
    expect(gw.sent).toEqual([]);
    expect(conditions(id)["READY"]?.status).toBe("FALSE");
  });

  test("an ended session says so in every condition", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const { epoch } = prepared(id, a);
    gw.connect(a, epoch, 0);
    const r = readiness();
    await r.evaluateOnce();
    expect(conditions(id)["READY"]?.status).toBe("TRUE");
    applyTransition(t.store, {
      allocation: {
        id: a,
        expectedPhase: "RUNNING",
        phase: "CANCELLED",
        reason: "IDLE_TIMEOUT",
        message: null,
      },
      workload: {
        id,
        expectedPhase: "RUNNING",
        expectedEpoch: epoch,
        phase: "CANCELLED",
        reason: "IDLE_TIMEOUT",
        message: null,
      },
    });
    await r.evaluateOnce();
    const c = conditions(id);
    for (const type of [
      "ALLOCATION_RUNNING",
      "WORKER_CONNECTED",
      "WORKSPACE_VISIBLE",
      "KERNEL_RESPONSIVE",
      "READY",
    ]) {
      expect(c[type]?.status).toBe("FALSE");
    }
    expect(c["READY"]?.message).toContain("CANCELLED (IDLE_TIMEOUT)");
  });

  test("after a restart, a session that ended meanwhile stops saying READY", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const { epoch } = prepared(id, a);
    for (const type of [
      "ALLOCATION_RUNNING",
      "WORKER_CONNECTED",
      "WORKSPACE_VISIBLE",
      "KERNEL_RESPONSIVE",
      "READY",
    ] as const) {
      setCondition(t.store, id, { type, status: "TRUE", reason: type, message: "from before" });
    }
    applyTransition(t.store, {
      allocation: {
        id: a,
        expectedPhase: "RUNNING",
        phase: "LOST",
        reason: "NOT_FOUND_BY_BACKEND",
        message: null,
      },
      workload: {
        id,
        expectedPhase: "RUNNING",
        expectedEpoch: epoch,
        phase: "LOST",
        reason: "NOT_FOUND_BY_BACKEND",
        message: null,
      },
    });
    await readiness().evaluateOnce(); // a fresh readiness: nothing in memory
    expect(conditions(id)["READY"]).toMatchObject({
      status: "FALSE",
      reason: "ALLOCATION_RUNNING",
    });
  });

  /** A readiness whose period (a minute) never comes by itself within a test. */
  const minutely = (timers: Timers) =>
    createSessionReadiness({
      store: bindSessionStore(t.store),
      gateway: gw,
      attempts: createSessionAttempts({ layout, key }),
      clock: t.clock,
      log: silentLog,
      intervalMs: 60_000,
      timers,
    });

  test("run() passes again once per period, on the injected timers", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const { epoch } = prepared(id, a);
    const timers = manualTimeline();
    const r = minutely(timers);
    const controller = new AbortController();
    const running = r.run(controller.signal);
    expect(conditions(id)["READY"]?.reason).toBe("WORKER_CONNECTED");
    expect(timers.pending()).toBe(1);
    gw.connect(a, epoch, 0); // no trigger: only the next period may notice
    timers.advance(60_000);
    await eventually(() => conditions(id)["READY"]?.status === "TRUE", {
      what: "READY",
      timeoutMs: 2000,
      intervalMs: 5,
    });
    controller.abort();
    await running;
  });

  test("trigger() runs a pass without waiting for the period", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const { epoch } = prepared(id, a);
    const r = minutely(systemTimers);
    const controller = new AbortController();
    const running = r.run(controller.signal);
    await r.evaluateOnce();
    expect(conditions(id)["READY"]?.reason).toBe("WORKER_CONNECTED");
    gw.connect(a, epoch, 0);
    r.trigger();
    await eventually(() => conditions(id)["READY"]?.status === "TRUE", {
      what: "READY",
      timeoutMs: 2000,
      intervalMs: 5,
    });
    controller.abort();
    await running;
  });
});

describe("readyCondition", () => {
  test("names the first missing condition in the fixed order", () => {
    const c = (type: ConditionType, status: "TRUE" | "FALSE" | "UNKNOWN") => ({
      type,
      status,
      reason: type,
      message: `${type} says ${status}`,
    });
    expect(
      readyCondition([
        c("ALLOCATION_RUNNING", "TRUE"),
        c("WORKER_CONNECTED", "TRUE"),
        c("WORKSPACE_VISIBLE", "UNKNOWN"),
        c("KERNEL_RESPONSIVE", "FALSE"),
      ]),
    ).toEqual({
      type: "READY",
      status: "FALSE",
      reason: "WORKSPACE_VISIBLE",
      message: "WORKSPACE_VISIBLE is UNKNOWN: WORKSPACE_VISIBLE says UNKNOWN",
    });
    expect(readyCondition([c("ALLOCATION_RUNNING", "TRUE")]).reason).toBe("WORKER_CONNECTED");
    expect(
      readyCondition([
        c("KERNEL_RESPONSIVE", "TRUE"),
        c("WORKSPACE_VISIBLE", "TRUE"),
        c("WORKER_CONNECTED", "TRUE"),
        c("ALLOCATION_RUNNING", "TRUE"),
      ]).status,
    ).toBe("TRUE");
  });
});
