/**
 * Issue 23, through the stock JupyterLab client library against the built daemon: nothing
 * printed is lost (a thread's lines between cells reach iopub parented to the last cell, and
 * the native exec API's next cell; a flushed print right before os._exit reaches its cell),
 * and comms work both ways (an ipywidgets slider set from the client, a comm target the
 * kernel registered echoing what the client sends, binary buffers included, comm_info listing the kernel's comms, a
 * widget changed from a thread between cells reaching the client).
 *
 * The kernel's interpreter is Debian's python3 (PATH puts /usr/bin first), with ipykernel,
 * matplotlib and ipywidgets, which CI installs.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  type Kernel,
  KernelManager,
  type KernelMessage,
  ServerConnection,
} from "@jupyterlab/services";
import { binaryToJson, jsonFraming } from "../../src/servers/http/jupyter/v1-framing.ts";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const TIMEOUT_MS = 30_000;
const PYTHON = "/usr/bin/python3";

const probe = spawnSync(PYTHON, ["-c", "import IPython, ipykernel, ipywidgets, comm"], {
  encoding: "utf8",
});
const missing =
  probe.status === 0
    ? null
    : `${PYTHON} lacks IPython/ipykernel/ipywidgets/comm (apt-get install python3-ipykernel python3-ipywidgets python3-comm)`;
if (missing !== null) console.log(`skipping the between-cells and comms test: ${missing}`);

type IOPub = KernelMessage.IIOPubMessage;

async function run(kernel: Kernel.IKernelConnection, code: string) {
  const future = kernel.requestExecute({ code });
  const iopub: IOPub[] = [];
  future.onIOPub = (msg) => {
    iopub.push(msg);
  };
  const reply = (await future.done) as KernelMessage.IExecuteReplyMsg;
  return { iopub, reply, msgId: future.msg.header.msg_id };
}

function stdout(iopub: readonly IOPub[]): string {
  return iopub
    .filter((m) => m.header.msg_type === "stream")
    .map((m) => m.content as { name: string; text: string })
    .filter((c) => c.name === "stdout")
    .map((c) => c.text)
    .join("");
}

/**
 * Python for a thread that prints `lines` once `release` exists: the test creates it after
 * the cell ended, so the lines are printed while no cell runs.
 */
function thread(release: string, lines: string): string {
  return [
    "import os, threading, time",
    "def work():",
    `    while not os.path.exists(${JSON.stringify(release)}): time.sleep(0.01)`,
    `    ${lines}`,
    "threading.Thread(target=work).start()",
  ].join("\n");
}

describe.skipIf(missing !== null)("between cells and comms, through JupyterLab's client", () => {
  let d: Daemon;
  let kernels: KernelManager;
  let kernel: Kernel.IKernelConnection;
  /** Every iopub message the kernel connection saw, whatever its parent. */
  const seen: IOPub[] = [];
  /** The session's workspace: the one directory both the test and the sandboxed kernel see. */
  let workspace: string;
  let port: number;
  let token: string;

  beforeAll(async () => {
    ensureBuilt();
    port = await freePort();
    d = await startDaemon({
      env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
      args: ["--listen", `127.0.0.1:${port}`],
    });
    token = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
    const settings = ServerConnection.makeSettings({
      baseUrl: `http://127.0.0.1:${port}/`,
      wsUrl: `ws://127.0.0.1:${port}/`,
      token,
      appendToken: true,
    });
    kernels = new KernelManager({ serverSettings: settings });
    kernel = await kernels.startNew({ name: "default" });
    await kernel.info;
    kernel.iopubMessage.connect((_, msg) => {
      seen.push(msg);
    });
    workspace = stdout((await run(kernel, "import os\nprint(os.getcwd())")).iopub).trim();
  }, TIMEOUT_MS);

  afterAll(async () => {
    kernels?.dispose();
    await d?.stop();
  }, 40_000);

  test(
    "a thread's lines printed between cells reach iopub as stdout, parented to the cell that ran last",
    async () => {
      const release = join(workspace, "go-ws");
      expect(
        (await run(kernel, thread(release, "for i in range(3): print('tick', i)"))).reply.content
          .status,
      ).toBe("ok");
      const last = await run(kernel, "1 + 1");
      writeFileSync(release, "");
      const between = () =>
        seen.filter(
          (m) =>
            m.parent_header && "msg_id" in m.parent_header && m.parent_header.msg_id === last.msgId,
        );
      await eventually(() => stdout(between()).includes("tick 2\n"), { timeoutMs: 20_000 });
      expect(stdout(between())).toBe("tick 0\ntick 1\ntick 2\n");
    },
    TIMEOUT_MS,
  );

  test(
    "the native exec API gets a thread's lines between cells at the start of its next cell",
    async () => {
      const workloadId = `w-${kernel.id.slice(2).replaceAll("-", "")}`;
      const release = join(workspace, "go-native");
      const started = await d.cli(
        "exec",
        workloadId,
        thread(release, "print('from the thread')"),
        "--json",
      );
      expect(JSON.parse(started.stdout)).toMatchObject({ status: "OK" });
      const ws = seen.length;
      writeFileSync(release, "");
      // Live on the websocket first (the sign it was printed), then with the next native cell.
      await eventually(() => stdout(seen.slice(ws)).includes("from the thread\n"), {
        timeoutMs: 20_000,
      });
      const next = await d.cli("exec", workloadId, "print('next')", "--json");
      expect(JSON.parse(next.stdout)).toMatchObject({
        status: "OK",
        output: "from the thread\nnext\n",
      });
    },
    TIMEOUT_MS,
  );

  test(
    "print(..., flush=True) right before os._exit reaches the client",
    async () => {
      const died = await run(kernel, "import os\nprint('last words', flush=True)\nos._exit(1)");
      expect(died.reply.content.status).toBe("error");
      expect(stdout(died.iopub)).toBe("last words\n");
    },
    TIMEOUT_MS,
  );

  test(
    "an ipywidgets slider: comm_open from the kernel, the client sets value 7, the next cell prints 7",
    async () => {
      const opened: { comm: Kernel.IComm; data: Record<string, unknown> }[] = [];
      kernel.registerCommTarget("jupyter.widget", (comm, msg) => {
        opened.push({ comm, data: msg.content.data as Record<string, unknown> });
      });
      const shown = await run(
        kernel,
        "import ipywidgets as w\ns = w.IntSlider(value=3)\ndisplay(s)",
      );
      expect(shown.reply.content.status).toBe("ok");
      const slider = opened.find((o) => o.data["_model_name"] === "IntSliderModel");
      if (slider === undefined) throw new Error("no IntSliderModel comm was opened");
      expect(slider.data["value"]).toBe(3);
      // ipywidgets 6's protocol (Debian bookworm): a backbone sync sets the kernel's state.
      slider.comm.send({ method: "backbone", sync_data: { value: 7 } });
      const after = await run(kernel, "print(s.value)");
      expect(stdout(after.iopub)).toBe("7\n");
      const info = await kernel.requestCommInfo({ target_name: "jupyter.widget" });
      const comms = (info.content as { comms: Record<string, { target_name: string }> }).comms;
      expect(Object.keys(comms)).toContain(slider.comm.commId);

      // The kernel changes the widget from a thread while no cell runs: the client hears it.
      const updates: unknown[] = [];
      slider.comm.onMsg = (msg) => {
        updates.push(msg.content.data);
      };
      const release = join(workspace, "go-widget");
      expect((await run(kernel, thread(release, "s.value = 9"))).reply.content.status).toBe("ok");
      writeFileSync(release, "");
      await eventually(() => updates.length > 0, { timeoutMs: 20_000 });
      expect(updates[0]).toMatchObject({ method: "update", state: { value: 9 } });
    },
    TIMEOUT_MS,
  );

  test(
    "a comm target the kernel registered, opened from the client, echoes what it is sent",
    async () => {
      const registered = await run(
        kernel,
        [
          "def on_open(comm, msg):",
          "    comm.on_msg(lambda m: comm.send({'echo': m['content']['data']},",
          "                                    buffers=[bytes(b)[::-1] for b in m['buffers']]))",
          "get_ipython().kernel.comm_manager.register_target('echo', on_open)",
        ].join("\n"),
      );
      expect(registered.reply.content.status).toBe("ok");
      const comm = kernel.createComm("echo");
      const echoed: { data: unknown; buffers: number[][] }[] = [];
      comm.onMsg = (msg) => {
        const buffers = (msg.buffers ?? []).map((b) =>
          Array.from(
            b instanceof ArrayBuffer
              ? new Uint8Array(b)
              : new Uint8Array(b.buffer, b.byteOffset, b.byteLength),
          ),
        );
        echoed.push({ data: msg.content.data, buffers });
      };
      await comm.open({}).done;
      // Binary buffers both ways (JupyterLab's v1 frames): the target sends them back reversed.
      await comm.send({ hello: "kernel" }, undefined, [new Uint8Array([1, 2, 3])]).done;
      await eventually(() => echoed.length > 0, { timeoutMs: 10_000 });
      expect(echoed[0]).toEqual({ data: { echo: { hello: "kernel" } }, buffers: [[3, 2, 1]] });
      const closed: unknown[] = [];
      const other = kernel.createComm("no-such-target");
      other.onClose = (msg) => {
        closed.push(msg.content);
      };
      await other.open({}).done;
      // No target: the kernel closes it again, as ipykernel does, instead of leaving it hanging.
      await eventually(() => closed.length > 0, { timeoutMs: 10_000 });
    },
    TIMEOUT_MS,
  );

  test(
    "on the JSON framing (Jupyter Server's gateway client), buffers travel as binary messages",
    async () => {
      // The echo target registered by the test before.
      const ws = new WebSocket(
        `ws://127.0.0.1:${port}/api/kernels/${kernel.id}/channels?token=${token}`,
      );
      ws.binaryType = "arraybuffer";
      const binary: Record<string, unknown>[] = [];
      ws.onmessage = (event) => {
        if (typeof event.data === "string") return;
        binary.push(JSON.parse(binaryToJson(new Uint8Array(event.data)) ?? "null"));
      };
      await new Promise((resolve) => {
        ws.onopen = resolve;
      });
      const message = (msgType: string, content: object, buffers: string[] = []) =>
        JSON.stringify({
          channel: "shell",
          header: { msg_id: `raw-${msgType}`, msg_type: msgType, session: "raw" },
          parent_header: {},
          metadata: {},
          content,
          buffers,
        });
      ws.send(message("comm_open", { comm_id: "raw1", target_name: "echo", data: {} }));
      const sent = jsonFraming(
        message("comm_msg", { comm_id: "raw1", data: { n: 1 } }, [
          Buffer.from([7, 8, 9]).toString("base64"),
        ]),
      );
      expect(typeof sent).not.toBe("string");
      ws.send(sent);
      await eventually(() => binary.length > 0, { timeoutMs: 10_000 });
      expect(binary[0]).toMatchObject({
        msg_type: "comm_msg",
        content: { comm_id: "raw1", data: { echo: { n: 1 } } },
        buffers: [Buffer.from([9, 8, 7]).toString("base64")],
      });
      ws.close();
    },
    TIMEOUT_MS,
  );

  test(
    "malformed comm messages from a client are ignored or refused, never a hang, a crash or a restart",
    async () => {
      expect((await run(kernel, "survivor = 41")).reply.content.status).toBe("ok");
      const ws = new WebSocket(
        `ws://127.0.0.1:${port}/api/kernels/${kernel.id}/channels?token=${token}`,
      );
      await new Promise((resolve) => {
        ws.onopen = resolve;
      });
      const raw = (msgType: string, content: unknown, buffers: unknown[] = []) =>
        JSON.stringify({
          channel: "shell",
          header: { msg_id: `bad-${msgType}-${Math.random()}`, msg_type: msgType, session: "bad" },
          parent_header: {},
          metadata: {},
          content,
          buffers,
        });
      const hostile = [
        raw("comm_msg", { data: { x: 1 } }), // no comm_id
        raw("comm_msg", { comm_id: "nobody", data: "not an object" }),
        raw("comm_msg", { comm_id: { nested: true }, data: [] }),
        raw("comm_open", { comm_id: "bad1" }), // no target_name
        raw("comm_open", { comm_id: "bad2", target_name: "no-such-target", data: 7 }),
        raw("comm_open", { comm_id: "bad3", target_name: "echo", data: {} }, ["%%% not base64"]),
        raw("comm_close", { comm_id: 12 }),
        raw("comm_msg", ["content", "is", "a", "list"]),
        raw("comm_msg", { comm_id: "raw1", data: {} }, [{ not: "a string" }]),
        "{ not json",
      ];
      for (const text of hostile) ws.send(text);
      // Queued behind all of them on the same kernel, through the other (JupyterLab's) socket:
      // answered, by the same interpreter (nothing restarted it).
      const after = await run(kernel, "survivor + 1");
      expect(after.reply.content.status).toBe("ok");
      const result = after.iopub.find((m) => m.header.msg_type === "execute_result");
      expect(result?.content).toMatchObject({ data: { "text/plain": "42" } });
      ws.close();
    },
    TIMEOUT_MS,
  );

  test(
    "a comm made through the comm package (as ipywidgets 8 makes them) reaches the client",
    async () => {
      const opened: Record<string, unknown>[] = [];
      kernel.registerCommTarget("from-comm-package", (_comm, msg) => {
        opened.push(msg.content.data as Record<string, unknown>);
      });
      const made = await run(
        kernel,
        "import comm\npkg = comm.create_comm(target_name='from-comm-package', data={'a': 1})",
      );
      expect(made.reply.content.status).toBe("ok");
      await eventually(() => opened.length > 0, { timeoutMs: 10_000 });
      expect(opened[0]).toEqual({ a: 1 });
    },
    TIMEOUT_MS,
  );
});
