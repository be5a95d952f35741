/**
 * The Jupyter hub is told when a kernel becomes READY, it does not look again on a timer: a
 * request sent to a session that is still starting runs as soon as the readiness pass writes
 * READY, on a timeline no one advances (the hub's only timer, its guard, never fires here).
 * And a session that ends is told to its sockets the same way. Real readiness, store,
 * Jupyter service and hub; only the worker is the fake gateway's.
 */
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
import { getAllocation, requestStop } from "../../src/adapters/store-sqlite/index.ts";
import { bindSessionStore } from "../../src/adapters/store-sqlite/stores/session-store.ts";
import { type StateLayout, stateLayout } from "../../src/core/layout.ts";
import { createJupyterService } from "../../src/core/session/jupyter-service.ts";
import { createSessionReadiness } from "../../src/core/session/readiness.ts";
import { createStandingSignal } from "../../src/core/session/standing-signal.ts";
import { manualTimeline, systemTimers } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { createKernelHubs, type KernelSocket } from "../../src/servers/http/jupyter/hub.ts";
import { signingKeyFromBytes } from "../../src/wire/credential.ts";
import { eventually } from "../support/eventually.ts";
import { type FakeGateway, fakeGateway } from "../support/fake-gateway.ts";
import { newWorkload, startAttempt, type TestStore, testStore } from "../support/store-fixtures.ts";

let t: TestStore;
let layout: StateLayout;
let gw: FakeGateway;
const key = signingKeyFromBytes(randomBytes(32));

beforeEach(() => {
  t = testStore();
  layout = stateLayout(join(t.dir, "state"));
  gw = fakeGateway();
});
afterEach(() => t.close());

/** What the preparer leaves behind for an attempt (marker and rank count). */
function prepared(workloadId: string, allocationId: string): number {
  const a = getAllocation(t.store, allocationId);
  if (!a) throw new Error("no allocation");
  const allocationDir = layout.attemptRecordDir(workloadId, allocationId);
  mkdirSync(allocationDir, { recursive: true });
  mkdirSync(layout.workspaceDir(workloadId), { recursive: true });
  writeFileSync(join(allocationDir, SESSION_ATTEMPT_FILE), JSON.stringify({ ranks: 1 }));
  writeFileSync(
    workspaceMarkerPath(layout.workspaceDir(workloadId)),
    workspaceMarker(key, a.id, a.epoch),
  );
  return a.epoch;
}

function engine() {
  const signal = createStandingSignal();
  const store = bindSessionStore(t.store);
  const readiness = createSessionReadiness({
    timers: systemTimers,
    store,
    gateway: gw,
    attempts: createSessionAttempts({ layout, key }),
    clock: t.clock,
    log: silentLog,
    onStandingChanged: (id) => signal.notify(id),
  });
  const jupyter = createJupyterService({
    store,
    gateway: gw,
    log: silentLog,
    standingSignal: signal,
  });
  const timeline = manualTimeline();
  const hubs = createKernelHubs({
    jupyter,
    interrupt: async () => ({ kind: "Ok", interrupted: false }),
    shutdown: () => {},
    presence: { seen() {}, whileRunning: () => () => {} },
    now: () => 0,
    timers: timeline,
    log: silentLog,
  });
  return { readiness, hubs, timeline };
}

function fakeSocket() {
  const sent: string[] = [];
  const closed: { code: number; reason: string }[] = [];
  const socket: KernelSocket = {
    send: (text) => void sent.push(text),
    close: (code, reason) => void closed.push({ code, reason }),
  };
  return { socket, sent, closed };
}

const execute = JSON.stringify({
  channel: "shell",
  header: { msg_id: "cell-1", msg_type: "execute_request", session: "s" },
  content: { code: "1+1", silent: false },
});

const jupyterRequests = () => gw.sent.filter((s) => s.request.kind === "jupyter");

describe("the Jupyter hub is told, not polling", () => {
  test("a request waiting for READY runs as soon as readiness writes it, with no time passing", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const epoch = prepared(id, a);
    const { readiness, hubs, timeline } = engine();
    await readiness.evaluateOnce();
    const client = fakeSocket();
    hubs.connect(id, client.socket).onMessage(execute);
    // Not READY (no worker): the request waits, and nothing reaches a kernel.
    await readiness.evaluateOnce();
    expect(jupyterRequests()).toEqual([]);

    const before = timeline.now();
    gw.connect(a, epoch, 0);
    await readiness.evaluateOnce();
    await eventually(() => jupyterRequests().length === 1, {
      timeoutMs: 2000,
      what: "the waiting request to reach the kernel once READY was written",
    });
    expect(timeline.now()).toBe(before);
    hubs.closeAll("test over");
  });

  test("a session asked to stop closes its sockets when readiness sees it, with no time passing", async () => {
    const id = newWorkload(t.store);
    const a = startAttempt(t.store, id);
    const epoch = prepared(id, a);
    gw.connect(a, epoch, 0);
    const { readiness, hubs } = engine();
    await readiness.evaluateOnce();
    const client = fakeSocket();
    hubs.connect(id, client.socket);
    requestStop(t.store, id, "USER_CANCELLED", "bye");
    await readiness.evaluateOnce();
    await eventually(() => client.closed.length === 1, {
      timeoutMs: 2000,
      what: "the socket closed once readiness saw the stop",
    });
    expect(client.closed[0]?.code).toBe(1000);
    hubs.closeAll("test over");
  });
});
