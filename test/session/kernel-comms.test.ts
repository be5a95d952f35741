/**
 * Comm messages in a kernel without IPython (the fallback kernel, where no comm target can
 * exist), or with IPython but without ipykernel: a client's comm_open is closed again,
 * comm_msg and comm_close are taken without a reply, comm_info lists nothing; none of them
 * hangs. A package is hidden from a real interpreter by a module on PYTHONPATH that refuses
 * to import.
 */
import { afterAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createKernel, type Kernel } from "../../src/apps/worker/kernel.ts";
import { systemTimers } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import type { CellEvent } from "../../src/wire/worker-protocol.ts";
import { realPython } from "../support/gateway-harness.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-kernel-comms-");
const opened: Kernel[] = [];
afterAll(async () => {
  for (const k of opened.splice(0)) await k.close();
});

/** A kernel whose interpreter cannot import `hidden` (a package name). */
function kernelWithout(hidden: string): Kernel {
  const dir = tempDir();
  mkdirSync(join(dir, hidden));
  writeFileSync(join(dir, hidden, "__init__.py"), "raise ImportError('hidden by the test')\n");
  // The interpreter, started with IPython hidden.
  const python = join(dir, "python3");
  writeFileSync(python, `#!/bin/sh\nPYTHONPATH=${dir} exec ${realPython()} "$@"\n`, {
    mode: 0o755,
  });
  const k = createKernel({ log: memoryLog(), timers: systemTimers, python });
  opened.push(k);
  return k;
}

async function ask(k: Kernel, msgType: string, content: Record<string, unknown>) {
  const events: CellEvent[] = [];
  const r = await k.exec("", { jupyter: { msgType, content }, onEvent: (e) => events.push(e) });
  const iopub = events.flatMap((e) => (e.type === "jupyter" ? [e] : []));
  return { reply: r.jupyter, iopub };
}

test("without IPython, comm requests are answered or closed, never left hanging", async () => {
  const k = kernelWithout("IPython");
  const info = await ask(k, "kernel_info_request", {});
  expect(info.reply?.content["implementation"]).toBe("openai4s-plain");

  const open = await ask(k, "comm_open", {
    comm_id: "c1",
    target_name: "jupyter.widget",
    data: {},
  });
  expect(open.reply?.msgType).toBe(""); // the protocol has no reply to a comm message
  const close = open.iopub.find((m) => m.msgType === "comm_close");
  expect(close?.content).toEqual({ comm_id: "c1", data: {} });

  const sent = await ask(k, "comm_msg", { comm_id: "c1", data: { x: 1 } });
  expect(sent.reply?.msgType).toBe("");
  expect(sent.iopub.map((m) => m.msgType)).toEqual(["status", "status"]);

  const comms = await ask(k, "comm_info_request", {});
  expect(comms.reply).toEqual({ msgType: "comm_info_reply", content: { status: "ok", comms: {} } });
});

const hasIPython = spawnSync(realPython(), ["-c", "import IPython"]).status === 0;

test.skipIf(!hasIPython)(
  "IPython without ipykernel: no comms, and a client's comm_open is closed again",
  async () => {
    const k = kernelWithout("ipykernel");
    const info = await ask(k, "kernel_info_request", {});
    expect(info.reply?.content["implementation"]).toBe("openai4s-ipython");
    const open = await ask(k, "comm_open", { comm_id: "c2", target_name: "x", data: {} });
    expect(open.iopub.find((m) => m.msgType === "comm_close")?.content).toEqual({
      comm_id: "c2",
      data: {},
    });
    // Libraries asking for the kernel's comm manager are told there is none, not an error.
    const asked = await ask(k, "execute_request", {
      code: "hasattr(get_ipython(), 'kernel')",
    });
    const result = asked.iopub.find((m) => m.msgType === "execute_result");
    expect(result?.content["data"]).toEqual({ "text/plain": "False" });
  },
);
