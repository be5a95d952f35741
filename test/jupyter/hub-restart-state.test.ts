/**
 * What /api/kernels says while a kernel restarts: `restarting`, even when a client's request
 * waits for the fresh interpreter meanwhile (the wait marks a kernel `starting` only when
 * it is not restarting), and the request runs once the restart is done.
 */
import { describe, expect, test } from "bun:test";
import type {
  JupyterOutcome,
  JupyterService,
  KernelStanding,
} from "../../src/core/session/jupyter-service.ts";
import { manualTimeline } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { createKernelHubs, type KernelSocket } from "../../src/servers/http/jupyter/hub.ts";
import { eventually } from "../support/eventually.ts";

function restartingKernel() {
  let standing: KernelStanding = { kind: "Ready" };
  let standingCalls = 0;
  let finish = () => {};
  const requests: string[] = [];
  // The hub waits to be told the standing changed (readiness tells it in the daemon).
  let waiters: (() => void)[] = [];
  const told = () => {
    const now = waiters;
    waiters = [];
    for (const w of now) w();
  };
  const reply: JupyterOutcome = {
    kind: "Reply",
    msgType: "execute_reply",
    content: { status: "ok", execution_count: 1 },
    kernelRestarted: false,
  };
  const service: Pick<
    JupyterService,
    "standing" | "standingChanged" | "request" | "onOutput" | "restart"
  > = {
    standing: () => {
      standingCalls += 1;
      return standing;
    },
    request(_id, msgType) {
      requests.push(msgType);
      return Promise.resolve(reply);
    },
    standingChanged: () => new Promise<void>((resolve) => void waiters.push(resolve)),
    onOutput: () => () => {},
    restart() {
      standing = { kind: "Starting", message: "a fresh interpreter is starting" };
      return new Promise((resolve) => {
        finish = () => {
          standing = { kind: "Ready" };
          told();
          resolve({ kind: "Restarted" });
        };
      });
    },
  };
  return {
    service: service as JupyterService,
    requests,
    standingCalls: () => standingCalls,
    waiting: () => waiters.length,
    finishRestart: () => finish(),
  };
}

const EXECUTE = JSON.stringify({
  channel: "shell",
  header: { msg_id: "cell-1", msg_type: "execute_request", session: "s" },
  content: { code: "1" },
});

describe("a request waiting through a restart", () => {
  test("leaves the kernel restarting, then runs on the fresh interpreter", async () => {
    const kernel = restartingKernel();
    const hubs = createKernelHubs({
      jupyter: kernel.service,
      interrupt: async () => ({ kind: "Ok", interrupted: false }),
      shutdown: () => {},
      presence: { seen() {}, whileRunning: () => () => {} },
      now: () => 0,
      log: silentLog,
      timers: manualTimeline(),
    });
    const sent: string[] = [];
    const socket: KernelSocket = { send: (t) => void sent.push(t), close: () => {} };
    const client = hubs.connect("w-1", socket);
    const restarted = hubs.restart("w-1");
    expect(hubs.activity("w-1").executionState).toBe("restarting");
    client.onMessage(EXECUTE);
    // The request is in its wait for the kernel: it asked, and waits to be told.
    await eventually(() => kernel.waiting() > 0);
    expect(kernel.requests).toEqual([]);
    expect(hubs.activity("w-1").executionState).toBe("restarting");
    kernel.finishRestart();
    expect(await restarted).toEqual({ kind: "Restarted" });
    await eventually(() => kernel.requests.includes("execute_request"));
    await eventually(() => sent.some((t) => t.includes('"execute_reply"')));
    hubs.closeAll("test over");
  });
});
