/**
 * A websocket client that keeps sending shell requests (a widget's comm_msg flood, or 16 MB
 * execute_requests) while a cell runs: each waits its turn in the daemon's memory, so the
 * queue is bounded, and the client that overruns it is closed (1008), not buffered for. Another
 * socket of the same kernel, and its requests, are not affected.
 */
import { describe, expect, test } from "bun:test";
import type { JupyterOutcome, JupyterService } from "../../src/core/session/jupyter-service.ts";
import { manualTimeline } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import { createKernelHubs, type KernelSocket } from "../../src/servers/http/jupyter/hub.ts";
import { eventually } from "../support/eventually.ts";

/** A kernel whose requests never answer until `release` (the first cell runs forever). */
function stuckKernel() {
  const waiting: (() => void)[] = [];
  let released = false;
  const answer: JupyterOutcome = { kind: "NotReady", message: "released" };
  const service: Pick<
    JupyterService,
    "standing" | "standingChanged" | "request" | "onOutput" | "restart"
  > = {
    standing: () => ({ kind: "Ready" }),
    // Always READY: nothing ever changes, so a waiter is only let go by its abort.
    standingChanged: (_id, signal) =>
      new Promise<void>((resolve) => signal?.addEventListener("abort", () => resolve())),
    request() {
      if (released) return Promise.resolve(answer);
      return new Promise<JupyterOutcome>((resolve) => waiting.push(() => resolve(answer)));
    },
    onOutput: () => () => {},
    restart: async () => ({ kind: "Restarted" }),
  };
  const release = () => {
    released = true;
    for (const resolve of waiting.splice(0)) resolve();
  };
  return { service: service as JupyterService, release };
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

function commMsg(n: number, data: string): string {
  return JSON.stringify({
    channel: "shell",
    header: { msg_id: `m${n}`, msg_type: "comm_msg", session: "s" },
    content: { comm_id: "c", data: { value: data } },
  });
}

/** Sends `message(n)` until the socket is closed; how many were offered, the last included. */
function floodUntilClosed(
  onMessage: (text: string) => void,
  closed: readonly unknown[],
  message: (n: number) => string,
): number {
  let n = 0;
  while (closed.length === 0 && n < 5000) onMessage(message(n++));
  return n;
}

function stuckHubs() {
  const kernel = stuckKernel();
  const hubs = createKernelHubs({
    jupyter: kernel.service,
    interrupt: async () => ({ kind: "Ok", interrupted: false }),
    shutdown: () => {},
    presence: { seen() {}, whileRunning: () => () => {} },
    now: () => 0,
    timers: manualTimeline(),
    log: silentLog,
  });
  return { kernel, hubs };
}

// Each cap alone, the other far away: a test that trips both at once lets either be broken.
describe("each of the shell queue's two caps holds by itself", () => {
  test("bytes: 1 MiB requests close the socket on the one that passes 64 MiB queued", () => {
    const { kernel, hubs } = stuckHubs();
    const flooder = fakeSocket();
    const a = hubs.connect("w-1", flooder.socket);
    const payload = "x".repeat(1024 * 1024);
    const offered = floodUntilClosed(a.onMessage, flooder.closed, (n) => commMsg(n, payload));
    // 64 fit (a little over 1 MiB each with the envelope: 63 of them, then the 64th passes).
    expect(offered).toBeGreaterThan(60);
    expect(offered).toBeLessThanOrEqual(65);
    expect(flooder.closed[0]?.code).toBe(1008);
    kernel.release();
    hubs.closeAll("test over");
  });

  test("count: tiny requests close the socket on the 1,001st queued", () => {
    const { kernel, hubs } = stuckHubs();
    const flooder = fakeSocket();
    const a = hubs.connect("w-1", flooder.socket);
    const offered = floodUntilClosed(a.onMessage, flooder.closed, (n) => commMsg(n, "x"));
    expect(offered).toBe(1001);
    expect(flooder.closed[0]?.code).toBe(1008);
    kernel.release();
    hubs.closeAll("test over");
  });
});

describe("the kernel hub's shell queue", () => {
  test("a client flooding requests behind a running cell is closed at the cap, not buffered for", async () => {
    const { kernel, hubs } = stuckHubs();
    const flooder = fakeSocket();
    const other = fakeSocket();
    const a = hubs.connect("w-1", flooder.socket);
    const b = hubs.connect("w-1", other.socket);
    const payload = "x".repeat(1024 * 1024);
    // 1 GiB offered; the daemon must refuse long before holding it.
    for (let n = 0; n < 1024 && flooder.closed.length === 0; n += 1)
      a.onMessage(commMsg(n, payload));
    expect(flooder.closed).toHaveLength(1);
    expect(flooder.closed[0]?.code).toBe(1008);
    expect(other.closed).toEqual([]);
    // The other socket's request is still taken, and answered once the cell ends.
    b.onMessage(
      JSON.stringify({
        channel: "shell",
        header: { msg_id: "info", msg_type: "kernel_info_request", session: "s" },
        content: {},
      }),
    );
    kernel.release();
    await eventually(() => other.sent.some((text) => text.includes('"kernel_info_reply"')));
    hubs.closeAll("test over");
  });
});
