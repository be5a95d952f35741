/**
 * A client's websocket drops while its cell runs (a network blip; JupyterLab's `reconnect()`)
 * and the same client session comes back: what the kernel said in the gap (the cell's output
 * and its execute_reply) is replayed to it, in order, as Jupyter Server does. Another session
 * attaching hears the kernel's state and what follows, never the first one's replay. A
 * session that never returns is forgotten within the bounds (bytes, time, count).
 */
import { describe, expect, test } from "bun:test";
import type { JupyterOutcome, JupyterService } from "../../src/core/session/jupyter-service.ts";
import { manualTimeline } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";
import type { ReplayLimits } from "../../src/servers/http/jupyter/client-sessions.ts";
import { createKernelHubs, type KernelSocket } from "../../src/servers/http/jupyter/hub.ts";
import type { CellEvent } from "../../src/wire/worker-protocol.ts";
import { eventually } from "../support/eventually.ts";

/** A kernel whose one running cell prints and ends when the test says. */
function steeredKernel() {
  let emit: ((event: CellEvent) => void) | null = null;
  let finish: (() => void) | null = null;
  const service: Pick<
    JupyterService,
    "standing" | "standingChanged" | "request" | "onOutput" | "restart"
  > = {
    standing: () => ({ kind: "Ready" }),
    // Always READY: nothing ever changes, so a waiter is only let go by its abort.
    standingChanged: (_id, signal) =>
      new Promise<void>((resolve) => signal?.addEventListener("abort", () => resolve())),
    request(_id, _type, _content, options) {
      emit = options?.onEvent ?? null;
      emit?.({
        type: "jupyter",
        channel: "iopub",
        msgType: "status",
        content: { execution_state: "busy" },
      });
      return new Promise<JupyterOutcome>((resolve) => {
        finish = () => {
          emit?.({
            type: "jupyter",
            channel: "iopub",
            msgType: "status",
            content: { execution_state: "idle" },
          });
          resolve({
            kind: "Reply",
            msgType: "execute_reply",
            content: { status: "ok", execution_count: 1 },
            kernelRestarted: false,
          });
        };
      });
    },
    onOutput: () => () => {},
    restart: async () => ({ kind: "Restarted" }),
  };
  return {
    service: service as JupyterService,
    print: (text: string) => emit?.({ type: "stream", name: "stdout", text }),
    finish: () => finish?.(),
    running: () => emit !== null,
  };
}

function fakeSocket() {
  const sent: {
    msg_type: string;
    channel: string;
    content: Record<string, unknown>;
    parent: string;
  }[] = [];
  const closed: { code: number; reason: string }[] = [];
  const socket: KernelSocket = {
    send: (text) => {
      const m = JSON.parse(text);
      sent.push({
        msg_type: m.msg_type,
        channel: m.channel,
        content: m.content,
        parent: m.parent_header?.msg_id ?? "",
      });
    },
    close: (code, reason) => void closed.push({ code, reason }),
  };
  return { socket, sent, closed };
}

const EXECUTE = JSON.stringify({
  channel: "shell",
  header: { msg_id: "cell-1", msg_type: "execute_request", session: "client-a" },
  content: { code: "long cell" },
});

function setUp(limits?: Partial<ReplayLimits>) {
  const kernel = steeredKernel();
  const timeline = manualTimeline();
  const hubs = createKernelHubs({
    jupyter: kernel.service,
    interrupt: async () => ({ kind: "Ok", interrupted: false }),
    shutdown: () => {},
    presence: { seen() {}, whileRunning: () => () => {} },
    now: () => 0,
    log: silentLog,
    timers: timeline,
    replay: { maxBytes: 1024 * 1024, keepMs: 60_000, maxDetached: 4, ...limits },
  });
  return { kernel, timeline, hubs };
}

const stdoutOf = (sent: ReturnType<typeof fakeSocket>["sent"]) =>
  sent
    .filter((m) => m.msg_type === "stream")
    .map((m) => String(m.content["text"]))
    .join("");

describe("the kernel hub's client sessions", () => {
  test("the same session reconnecting mid-cell gets the gap's output and the execute_reply", async () => {
    const { kernel, hubs } = setUp();
    const first = fakeSocket();
    const a = hubs.connect("w-1", first.socket, "client-a");
    a.onMessage(EXECUTE);
    await eventually(() => kernel.running());
    kernel.print("before the blip\n");
    a.onClose();
    kernel.print("during the blip\n");
    kernel.finish();
    await Bun.sleep(0);
    const again = fakeSocket();
    hubs.connect("w-1", again.socket, "client-a");
    expect(stdoutOf(first.sent)).toBe("before the blip\n");
    expect(stdoutOf(again.sent)).toBe("during the blip\n");
    const reply = again.sent.find((m) => m.msg_type === "execute_reply");
    expect(reply?.parent).toBe("cell-1");
    expect(reply?.channel).toBe("shell");
    // In order: the output, the idle, the reply (the kernel is idle now: no status after).
    expect(again.sent.map((m) => m.msg_type)).toEqual(["stream", "status", "execute_reply"]);
    hubs.closeAll("test over");
  });

  test("another session attaching gets the state and later messages, not the replay", async () => {
    const { kernel, hubs } = setUp();
    const first = fakeSocket();
    const a = hubs.connect("w-1", first.socket, "client-a");
    a.onMessage(EXECUTE);
    await eventually(() => kernel.running());
    a.onClose();
    kernel.print("during the blip\n");
    const other = fakeSocket();
    hubs.connect("w-1", other.socket, "client-b");
    expect(other.sent.map((m) => [m.msg_type, m.content["execution_state"]])).toEqual([
      ["status", "busy"],
    ]);
    kernel.print("after b attached\n");
    kernel.finish();
    await Bun.sleep(0);
    expect(stdoutOf(other.sent)).toBe("after b attached\n");
    expect(other.sent.some((m) => m.msg_type === "execute_reply")).toBe(false);
    hubs.closeAll("test over");
  });

  test("a websocket that names no session keeps nothing", async () => {
    const { kernel, hubs } = setUp();
    const first = fakeSocket();
    const a = hubs.connect("w-1", first.socket, null);
    a.onMessage(EXECUTE);
    await eventually(() => kernel.running());
    a.onClose();
    kernel.print("lost\n");
    kernel.finish();
    await Bun.sleep(0);
    const again = fakeSocket();
    hubs.connect("w-1", again.socket, null);
    expect(stdoutOf(again.sent)).toBe("");
    hubs.closeAll("test over");
  });

  // Notebook 6 and jupyter_server 1.x in gateway mode open their websocket here without the
  // browser's session_id; the browser's messages name it in their header.
  const byHeader = (session: string) => `caller\u0000${session}`;
  const KERNEL_INFO = JSON.stringify({
    channel: "shell",
    header: { msg_id: "info-2", msg_type: "kernel_info_request", session: "client-a" },
    content: {},
  });

  test("a websocket naming no session takes the one its messages' header names, and gets its replay", async () => {
    const { kernel, hubs } = setUp();
    const first = fakeSocket();
    const a = hubs.connect("w-1", first.socket, null, byHeader);
    a.onMessage(EXECUTE);
    await eventually(() => kernel.running());
    a.onClose();
    kernel.print("during the blip\n");
    kernel.finish();
    await Bun.sleep(0);
    const again = fakeSocket();
    const b = hubs.connect("w-1", again.socket, null, byHeader);
    expect(again.sent).toEqual([]);
    b.onMessage(KERNEL_INFO);
    expect(stdoutOf(again.sent)).toBe("during the blip\n");
    expect(again.sent.slice(0, 3).map((m) => m.msg_type)).toEqual([
      "stream",
      "status",
      "execute_reply",
    ]);
    expect(again.sent[2]?.parent).toBe("cell-1");
    hubs.closeAll("test over");
  });

  test("a header's session never takes over a session whose websocket is open", async () => {
    const { kernel, hubs } = setUp();
    const named = fakeSocket();
    hubs.connect("w-1", named.socket, byHeader("client-a"));
    const other = fakeSocket();
    const b = hubs.connect("w-1", other.socket, null, byHeader);
    b.onMessage(EXECUTE);
    await eventually(() => kernel.running());
    expect(named.closed).toEqual([]);
    expect(hubs.activity("w-1").connections).toBe(2);
    kernel.finish();
    hubs.closeAll("test over");
  });

  test("a new websocket of an attached session replaces the old one", () => {
    const { hubs } = setUp();
    const first = fakeSocket();
    hubs.connect("w-1", first.socket, "client-a");
    const again = fakeSocket();
    hubs.connect("w-1", again.socket, "client-a");
    expect(first.closed).toHaveLength(1);
    expect(hubs.activity("w-1").connections).toBe(1);
    hubs.closeAll("test over");
  });

  test("past the byte bound the oldest output goes, the reply stays, and the replay says so", async () => {
    const { kernel, hubs } = setUp({ maxBytes: 4096 });
    const first = fakeSocket();
    const a = hubs.connect("w-1", first.socket, "client-a");
    a.onMessage(EXECUTE);
    await eventually(() => kernel.running());
    a.onClose();
    for (let n = 0; n < 100; n += 1) kernel.print(`line ${n}\n`);
    kernel.finish();
    await Bun.sleep(0);
    const again = fakeSocket();
    hubs.connect("w-1", again.socket, "client-a");
    const text = stdoutOf(again.sent);
    expect(text).toContain("line 99\n");
    expect(text).not.toContain("line 0\n");
    expect(again.sent.some((m) => m.msg_type === "execute_reply")).toBe(true);
    const notice = again.sent.find((m) => m.content["name"] === "stderr");
    expect(String(notice?.content["text"])).toMatch(/\d+ output messages .* dropped/);
    hubs.closeAll("test over");
  });

  test("a session away longer than the keep time is forgotten", async () => {
    const { kernel, timeline, hubs } = setUp({ keepMs: 60_000 });
    const first = fakeSocket();
    const a = hubs.connect("w-1", first.socket, "client-a");
    a.onMessage(EXECUTE);
    await eventually(() => kernel.running());
    a.onClose();
    kernel.print("gone\n");
    timeline.advance(60_001);
    kernel.finish();
    await Bun.sleep(0);
    const again = fakeSocket();
    hubs.connect("w-1", again.socket, "client-a");
    expect(stdoutOf(again.sent)).toBe("");
    expect(again.sent.some((m) => m.msg_type === "execute_reply")).toBe(false);
    hubs.closeAll("test over");
  });

  test("at most maxDetached sessions are kept per kernel: the oldest goes", async () => {
    const { kernel, hubs } = setUp({ maxDetached: 2 });
    const runner = hubs.connect("w-1", fakeSocket().socket, "runner");
    runner.onMessage(EXECUTE);
    await eventually(() => kernel.running());
    const left = ["s1", "s2", "s3"].map((key) => hubs.connect("w-1", fakeSocket().socket, key));
    for (const c of left) c.onClose();
    kernel.print("while they were away\n");
    const s1 = fakeSocket();
    hubs.connect("w-1", s1.socket, "s1");
    const s3 = fakeSocket();
    hubs.connect("w-1", s3.socket, "s3");
    expect(stdoutOf(s1.sent)).toBe("");
    expect(stdoutOf(s3.sent)).toBe("while they were away\n");
    kernel.finish();
    hubs.closeAll("test over");
  });
});
