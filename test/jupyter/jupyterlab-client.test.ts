/**
 * The stock JupyterLab client library (@jupyterlab/services, what JupyterLab itself runs)
 * drives the built daemon's Jupyter gateway on the local backend: kernelspecs, a kernel
 * started as a session, execute with stream + display (a matplotlib PNG) + result + error,
 * input(), completion, inspection, an interrupted `while True:` loop, a restart that clears
 * state, and a shutdown. The REST calls authenticate with `Authorization: token T` and the
 * websocket with `?token=T`, as JupyterLab sends them; another principal sees nothing.
 *
 * The kernel's interpreter is Debian's python3 (PATH puts /usr/bin first): it has IPython,
 * ipykernel and matplotlib, which CI installs.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  type Kernel,
  KernelManager,
  type KernelMessage,
  KernelSpecManager,
  ServerConnection,
} from "@jupyterlab/services";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const TIMEOUT_MS = 30_000;
const PYTHON = "/usr/bin/python3";

function missingModules(): string | null {
  const probe = spawnSync(PYTHON, ["-c", "import IPython, ipykernel, matplotlib"], {
    encoding: "utf8",
  });
  return probe.status === 0
    ? null
    : `${PYTHON} lacks IPython/ipykernel/matplotlib (apt-get install python3-ipykernel python3-matplotlib)`;
}

const missing = missingModules();
if (missing !== null) console.log(`skipping the JupyterLab client test: ${missing}`);

type IOPub = KernelMessage.IIOPubMessage;

/** Runs `code`, answering input() with `inputs`, and returns the iopub messages and reply. */
async function run(
  kernel: Kernel.IKernelConnection,
  code: string,
  inputs: readonly string[] = [],
): Promise<{ iopub: IOPub[]; reply: KernelMessage.IExecuteReplyMsg }> {
  const iopub: IOPub[] = [];
  const future = kernel.requestExecute({ code, allow_stdin: inputs.length > 0 });
  const pending = [...inputs];
  future.onIOPub = (msg) => {
    iopub.push(msg);
  };
  future.onStdin = (msg) => {
    if (msg.header.msg_type === "input_request") {
      const header = msg.header as KernelMessage.IHeader<"input_request">;
      future.sendInputReply({ status: "ok", value: pending.shift() ?? "" }, header);
    }
  };
  const reply = (await future.done) as KernelMessage.IExecuteReplyMsg;
  return { iopub, reply };
}

function ofType(iopub: readonly IOPub[], type: string): IOPub[] {
  return iopub.filter((m) => m.header.msg_type === type);
}

/** The content of a message that must be there (a missing one fails the test, not a TypeError). */
function contentOf<T>(msg: IOPub | undefined): T {
  if (msg === undefined) throw new Error("expected message missing");
  return msg.content as T;
}

function stdout(iopub: readonly IOPub[]): string {
  return ofType(iopub, "stream")
    .map((m) => m.content as { name: string; text: string })
    .filter((c) => c.name === "stdout")
    .map((c) => c.text)
    .join("");
}

describe.skipIf(missing !== null)("JupyterLab's client library against the daemon", () => {
  let d: Daemon;
  let port: number;
  let token: string;
  let settings: ServerConnection.ISettings;
  let kernels: KernelManager;
  let kernel: Kernel.IKernelConnection;

  beforeAll(async () => {
    ensureBuilt();
    port = await freePort();
    d = await startDaemon({
      env: { PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}` },
      args: ["--listen", `127.0.0.1:${port}`],
    });
    token = readFileSync(join(d.stateDir, "admin-token"), "utf8").trim();
    settings = ServerConnection.makeSettings({
      baseUrl: `http://127.0.0.1:${port}/`,
      wsUrl: `ws://127.0.0.1:${port}/`,
      token,
      appendToken: true,
    });
    kernels = new KernelManager({ serverSettings: settings });
  }, TIMEOUT_MS);

  afterAll(async () => {
    kernels?.dispose();
    await d?.stop();
  }, 40_000);

  test("kernelspecs: one per SESSION profile, with the profile's public view", async () => {
    const specs = new KernelSpecManager({ serverSettings: settings });
    await specs.ready;
    const all = specs.specs;
    expect(all?.default).toBe("default");
    const spec = all?.kernelspecs["default"];
    expect(spec?.display_name).toBe("Python (default)");
    expect(spec?.language).toBe("python");
    expect((spec?.metadata as { openai4s?: { kinds?: string[] } })?.openai4s?.kinds).toContain(
      "SESSION",
    );
    specs.dispose();
  });

  test(
    "a kernel starts as a session and answers kernel_info with IPython's implementation",
    async () => {
      kernel = await kernels.startNew({ name: "default" });
      expect(kernel.id).toMatch(/^\w+-\w+-\w+-\w+-\w+$/); // the shape Jupyter Server routes take
      const info = await kernel.info;
      expect(info.implementation).toBe("openai4s-ipython");
      expect(info.language_info.name).toBe("python");
      expect(info.protocol_version).toBe("5.3");
    },
    TIMEOUT_MS,
  );

  test(
    "execute: stream, a matplotlib PNG, the result with its count, then an error",
    async () => {
      const { iopub, reply } = await run(
        kernel,
        [
          "import matplotlib.pyplot as plt",
          "print('hello from the kernel')",
          "plt.plot([1, 2, 3])",
          "plt.show()",
          "x = 41",
          "x + 1",
        ].join("\n"),
      );
      expect(reply.content.status).toBe("ok");
      expect(stdout(iopub)).toContain("hello from the kernel\n");
      const png = ofType(iopub, "display_data").find(
        (m) => "image/png" in (m.content as { data: object }).data,
      );
      expect(png).toBeDefined();
      const data = contentOf<{ data: Record<string, string> }>(png).data;
      expect(
        Buffer.from(data["image/png"] ?? "", "base64")
          .subarray(1, 4)
          .toString(),
      ).toBe("PNG");
      const result = contentOf<{
        data: Record<string, string>;
        execution_count: number;
      }>(ofType(iopub, "execute_result")[0]);
      expect(result.data["text/plain"]).toBe("42");
      expect(result.execution_count).toBe(
        (reply.content as { execution_count: number }).execution_count,
      );
      expect(
        ofType(iopub, "status").map(
          (m) => (m.content as { execution_state: string }).execution_state,
        ),
      ).toEqual(["busy", "idle"]);

      const failed = await run(kernel, "1 / 0");
      expect(failed.reply.content.status).toBe("error");
      const error = contentOf<{ ename: string }>(ofType(failed.iopub, "error")[0]);
      expect(error.ename).toBe("ZeroDivisionError");
    },
    TIMEOUT_MS,
  );

  test(
    "what subprocesses and C code print lands in the cell, not the job log",
    async () => {
      const { iopub, reply } = await run(
        kernel,
        "import os, ctypes\nos.system('echo from-a-subprocess')\nctypes.CDLL(None).printf(b'from C\\n')",
      );
      expect(reply.content.status).toBe("ok");
      expect(stdout(iopub)).toContain("from-a-subprocess\n");
      expect(stdout(iopub)).toContain("from C\n");
    },
    TIMEOUT_MS,
  );

  test(
    "input() asks the client and gets its answer",
    async () => {
      const { iopub, reply } = await run(kernel, "name = input('who? ')\nprint('hello', name)", [
        "ada",
      ]);
      expect(reply.content.status).toBe("ok");
      expect(stdout(iopub)).toContain("hello ada\n");
    },
    TIMEOUT_MS,
  );

  test(
    "completion and inspection are the kernel's",
    async () => {
      await run(kernel, "import os");
      const completed = await kernel.requestComplete({ code: "os.pa", cursor_pos: 5 });
      expect(completed.content.status).toBe("ok");
      expect((completed.content as { matches: string[] }).matches).toContain("path");
      const inspected = await kernel.requestInspect({
        code: "len",
        cursor_pos: 3,
        detail_level: 0,
      });
      expect(inspected.content.status).toBe("ok");
      const found = inspected.content as { found: boolean; data: Record<string, string> };
      expect(found.found).toBe(true);
      expect(found.data["text/plain"]).toContain("Return the number of items");
    },
    TIMEOUT_MS,
  );

  test(
    "interrupt stops `while True: pass`; the kernel and its variables stay",
    async () => {
      await run(kernel, "kept = 'still here'");
      const iopub: IOPub[] = [];
      const future = kernel.requestExecute({ code: "while True: pass" });
      future.onIOPub = (msg) => {
        iopub.push(msg);
      };
      await eventually(() => ofType(iopub, "execute_input").length > 0, { timeoutMs: 20_000 });
      await kernel.interrupt();
      const reply = (await future.done) as KernelMessage.IExecuteReplyMsg;
      expect(reply.content.status).toBe("error");
      expect(contentOf<{ ename: string }>(ofType(iopub, "error")[0]).ename).toBe(
        "KeyboardInterrupt",
      );
      const after = await run(kernel, "kept");
      const result = contentOf<{
        data: Record<string, string>;
      }>(ofType(after.iopub, "execute_result")[0]);
      expect(result.data["text/plain"]).toBe("'still here'");
    },
    TIMEOUT_MS,
  );

  test(
    "a failed cell aborts the cells queued behind it (stop_on_error, as Run All), not later ones",
    async () => {
      const first = kernel.requestExecute({
        code: "import time\ntime.sleep(0.3)\n1 / 0",
        stop_on_error: true,
      });
      const second = kernel.requestExecute({ code: "queued_after_error = 1" });
      expect((await first.done).content.status).toBe("error");
      expect((await second.done).content.status).toBe("aborted");
      const after = await run(kernel, "'queued_after_error' in dir()");
      expect(after.reply.content.status).toBe("ok");
      const result = contentOf<{ data: Record<string, string> }>(
        ofType(after.iopub, "execute_result")[0],
      );
      expect(result.data["text/plain"]).toBe("False");
    },
    TIMEOUT_MS,
  );

  test(
    "a kernel that dies under a cell answers it (error, then idle); the next cell runs fresh",
    async () => {
      await run(kernel, "before_death = 1");
      const died = await run(kernel, "import os\nos._exit(1)");
      expect(died.reply.content.status).toBe("error");
      expect((died.reply.content as { ename?: string }).ename).toBe("KernelDied");
      const after = await run(kernel, "'before_death' in dir()");
      expect(after.reply.content.status).toBe("ok");
      const result = contentOf<{ data: Record<string, string> }>(
        ofType(after.iopub, "execute_result")[0],
      );
      expect(result.data["text/plain"]).toBe("False");
    },
    TIMEOUT_MS,
  );

  test(
    "restart gives a fresh interpreter with the same id: the state is cleared",
    async () => {
      const id = kernel.id;
      await kernel.restart();
      expect(kernel.id).toBe(id);
      const { iopub, reply } = await run(kernel, "kept");
      expect(reply.content.status).toBe("error");
      expect(contentOf<{ ename: string }>(ofType(iopub, "error")[0]).ename).toBe("NameError");
    },
    TIMEOUT_MS,
  );

  test(
    "another principal sees no kernel of the admin's; no token, no answer",
    async () => {
      expect((await d.cli("principal", "add", "eve")).code).toBe(0);
      const eve = (await d.cli("token", "issue", "eve")).stdout.trim();
      const base = `http://127.0.0.1:${port}`;
      const asEve = { Authorization: `token ${eve}` };
      const listed = (await (
        await fetch(`${base}/api/kernels`, { headers: asEve })
      ).json()) as unknown[];
      expect(listed).toEqual([]);
      expect((await fetch(`${base}/api/kernels/${kernel.id}`, { headers: asEve })).status).toBe(
        404,
      );
      const interrupt = await fetch(`${base}/api/kernels/${kernel.id}/interrupt`, {
        method: "POST",
        headers: asEve,
      });
      expect(interrupt.status).toBe(404);
      const socket = await fetch(`${base}/api/kernels/${kernel.id}/channels?token=${eve}`, {
        headers: { Upgrade: "websocket", Connection: "Upgrade" },
      });
      expect(socket.status).toBe(404);
      expect((await fetch(`${base}/api/kernels`)).status).toBe(401);
      // The admin's own call still sees it.
      const mine = await fetch(`${base}/api/kernels/${kernel.id}?token=${token}`);
      expect(mine.status).toBe(200);
    },
    TIMEOUT_MS,
  );

  test(
    "a session cancelled elsewhere reaches a connected client: status dead, the socket closed with the reason",
    async () => {
      const other = await kernels.startNew({ name: "default" });
      await other.info;
      const ws = new WebSocket(
        `ws://127.0.0.1:${port}/api/kernels/${other.id}/channels?token=${token}`,
      );
      const states: string[] = [];
      const closed = new Promise<{ code: number; reason: string }>((resolve) => {
        ws.onclose = (event) => resolve({ code: event.code, reason: event.reason });
      });
      ws.onmessage = (event) => {
        const m = JSON.parse(String(event.data)) as {
          msg_type: string;
          content: { execution_state?: string };
        };
        if (m.msg_type === "status") states.push(m.content.execution_state ?? "");
      };
      await new Promise((resolve) => {
        ws.onopen = resolve;
      });
      const workloadId = `w-${other.id.slice(2).replaceAll("-", "")}`;
      expect((await d.cli("cancel", workloadId)).code).toBe(0);
      const end = await closed;
      expect(states).toContain("dead");
      expect(end.reason).toContain("CANCELLED");
      other.dispose();
    },
    TIMEOUT_MS,
  );

  test(
    "shutdown ends the session: the kernel is gone from the list",
    async () => {
      const id = kernel.id;
      await kernel.shutdown();
      const base = `http://127.0.0.1:${port}`;
      const headers = { Authorization: `token ${token}` };
      await eventually(
        async () => (await fetch(`${base}/api/kernels/${id}`, { headers })).status === 404,
        { timeoutMs: 20_000 },
      );
      const listed = (await (await fetch(`${base}/api/kernels`, { headers })).json()) as unknown[];
      expect(listed).toEqual([]);
    },
    TIMEOUT_MS,
  );
  test(
    "a daemon that stops closes its kernels' websockets at once (clients reconnect), not after the drain",
    async () => {
      const other = await kernels.startNew({ name: "default" });
      await other.info;
      const ws = new WebSocket(
        `ws://127.0.0.1:${port}/api/kernels/${other.id}/channels?token=${token}`,
      );
      await new Promise((resolve) => {
        ws.onopen = resolve;
      });
      const closed = new Promise<string>((resolve) => {
        ws.onclose = (event) => resolve(event.reason);
      });
      other.dispose();
      const t0 = performance.now();
      d.proc.kill("SIGTERM");
      await d.proc.exited;
      // The drain grace is 5 s: a daemon waiting on open websockets took all of it.
      expect(performance.now() - t0).toBeLessThan(3000);
      expect(await closed).toContain("the daemon is stopping");
    },
    TIMEOUT_MS,
  );
});
