/**
 * A daemon restart keeps the kernel and its state, and a Jupyter client reconnects (issue 23):
 * JupyterLab's client library opens a kernel on the built daemon and sets `x = 41`; the
 * daemon is stopped as an admin stops it (SIGTERM) and started again on the same state dir,
 * HTTP port and worker gateway port; the client reconnects its websocket and `x + 1` is 42.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  type Kernel,
  KernelManager,
  type KernelMessage,
  ServerConnection,
} from "@jupyterlab/services";
import { type Daemon, ensureBuilt, freePort, startDaemon } from "../support/binary-daemon.ts";
import { eventually } from "../support/eventually.ts";

const TIMEOUT_MS = 60_000;
const PYTHON = "/usr/bin/python3";
const missing =
  spawnSync(PYTHON, ["-c", "import IPython, ipykernel"]).status === 0
    ? null
    : `${PYTHON} lacks IPython/ipykernel (apt-get install python3-ipykernel)`;
if (missing !== null) console.log(`skipping the daemon restart test: ${missing}`);

async function value(kernel: Kernel.IKernelConnection, code: string): Promise<string> {
  const future = kernel.requestExecute({ code });
  let text = "";
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === "execute_result") {
      text = (msg.content as { data: Record<string, string> }).data["text/plain"] ?? "";
    }
  };
  const reply = (await future.done) as KernelMessage.IExecuteReplyMsg;
  expect(reply.content.status).toBe("ok");
  return text;
}

describe.skipIf(missing !== null)("a daemon restart under a connected Jupyter client", () => {
  const daemons: Daemon[] = [];
  let kernels: KernelManager;

  beforeAll(() => ensureBuilt());
  afterAll(async () => {
    kernels?.dispose();
    // The newest first: the first one's directory holds the workers it started.
    for (const d of daemons.reverse()) await d.stop();
  }, 40_000);

  test(
    "keeps the kernel and its variables; the client reconnects and x + 1 == 42",
    async () => {
      const port = await freePort();
      const env = {
        PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}`,
        // The same gateway port after the restart: the workers' credentials name it.
        OPENAI4S_WORKER_LISTEN: `127.0.0.1:${await freePort()}`,
      };
      const args = ["--listen", `127.0.0.1:${port}`];
      const first = await startDaemon({ env, args });
      daemons.push(first);
      const token = readFileSync(join(first.stateDir, "admin-token"), "utf8").trim();
      const settings = ServerConnection.makeSettings({
        baseUrl: `http://127.0.0.1:${port}/`,
        wsUrl: `ws://127.0.0.1:${port}/`,
        token,
        appendToken: true,
      });
      kernels = new KernelManager({ serverSettings: settings });
      const kernel = await kernels.startNew({ name: "default" });
      expect(await value(kernel, "x = 41\nx")).toBe("41");

      first.proc.kill("SIGTERM");
      await first.proc.exited;
      daemons.push(await startDaemon({ env, args, stateDir: first.stateDir }));

      await kernel.reconnect();
      expect(await value(kernel, "x + 1")).toBe("42");
    },
    TIMEOUT_MS,
  );

  test(
    "the client reconnects by itself (the daemon closes with 1012, service restart)",
    async () => {
      const port = await freePort();
      const env = {
        PATH: `/usr/bin:/bin:${process.env["PATH"] ?? ""}`,
        OPENAI4S_WORKER_LISTEN: `127.0.0.1:${await freePort()}`,
      };
      const args = ["--listen", `127.0.0.1:${port}`];
      const first = await startDaemon({ env, args });
      daemons.push(first);
      const token = readFileSync(join(first.stateDir, "admin-token"), "utf8").trim();
      const settings = ServerConnection.makeSettings({
        baseUrl: `http://127.0.0.1:${port}/`,
        wsUrl: `ws://127.0.0.1:${port}/`,
        token,
        appendToken: true,
      });
      const manager = new KernelManager({ serverSettings: settings });
      const kernel = await manager.startNew({ name: "default" });
      expect(await value(kernel, "y = 1\ny")).toBe("1");
      const statuses: string[] = [];
      kernel.connectionStatusChanged.connect((_, status) => void statuses.push(status));
      first.proc.kill("SIGTERM");
      await first.proc.exited;
      daemons.push(await startDaemon({ env, args, stateDir: first.stateDir }));
      // No reconnect() here: what JupyterLab does after a blip is all the client does.
      await eventually(() => kernel.connectionStatus === "connected", { timeoutMs: 40_000 });
      expect(statuses).not.toContain("disconnected");
      expect(await value(kernel, "y + 1")).toBe("2");
      manager.dispose();
    },
    TIMEOUT_MS,
  );
});
