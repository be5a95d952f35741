/**
 * Nothing printed is lost (issue 23): what a thread a cell started prints after the cell
 * ended goes out at once, named by that cell, and waits for the next plain exec; what a cell
 * flushed right before `os._exit` reaches its answer. Against a real interpreter.
 */
import { afterAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createKernel, type Kernel } from "../../src/apps/worker/kernel.ts";
import { systemTimers } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";
import type { CellEvent } from "../../src/wire/worker-protocol.ts";
import { eventually } from "../support/eventually.ts";
import { realPython } from "../support/gateway-harness.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-between-");

const opened: Kernel[] = [];
afterAll(async () => {
  for (const k of opened.splice(0)) await k.close();
});

interface Idle {
  readonly cell: string | undefined;
  readonly event: CellEvent;
}

function kernel(options: { maxOutputChars?: number } = {}) {
  const idle: Idle[] = [];
  const k = createKernel({
    log: memoryLog(),
    timers: systemTimers,
    python: realPython(),
    onIdleEvent: (event, cell) => idle.push({ cell, event }),
    ...options,
  });
  opened.push(k);
  return { k, idle };
}

function text(events: readonly CellEvent[], name = "stdout"): string {
  return events.map((e) => (e.type === "stream" && e.name === name ? e.text : "")).join("");
}

async function run(k: Kernel, code: string, cell?: string) {
  const events: CellEvent[] = [];
  const r = await k.exec(code, { onEvent: (e) => events.push(e), ...(cell && { cell }) });
  return { ...r, events };
}

/**
 * A thread that prints `lines` once `release` exists: the test creates it after the cell
 * ended, so the printing happens while no cell runs, whatever the machine's speed.
 */
function thread(release: string, lines: string): string {
  return [
    "import os, threading, time",
    "done = threading.Event()",
    "def work():",
    `    while not os.path.exists(${JSON.stringify(release)}): time.sleep(0.01)`,
    `    ${lines}`,
    "    done.set()",
    "threading.Thread(target=work).start()",
  ].join("\n");
}

test("a thread that prints between cells: out at once under the last cell, then with the next exec", async () => {
  const { k, idle } = kernel();
  const release = join(tempDir(), "go");
  const code = thread(release, "for i in range(5): print('tick', i)");
  expect((await run(k, code, "starter")).status).toBe("OK");
  expect((await run(k, "1", "last")).status).toBe("OK");
  writeFileSync(release, "");
  await eventually(() => text(idle.map((i) => i.event)).includes("tick 4\n"));
  expect(text(idle.map((i) => i.event))).toBe("tick 0\ntick 1\ntick 2\ntick 3\ntick 4\n");
  // Named by the cell that ran last, as ipykernel parents such output.
  expect(new Set(idle.map((i) => i.cell))).toEqual(new Set(["last"]));
  // The native API's reader gets them too: first in the next cell's output.
  const next = await run(k, "done.wait(5); print('next')");
  expect(text(next.events)).toBe("tick 0\ntick 1\ntick 2\ntick 3\ntick 4\nnext\n");
  // ... once.
  expect(text((await run(k, "print('after')")).events)).toBe("after\n");
});

test("output between cells is capped until the next cell, and says so", async () => {
  const { k, idle } = kernel({ maxOutputChars: 1000 });
  const release = join(tempDir(), "go");
  await run(k, thread(release, "for i in range(100): print('x' * 99)"));
  writeFileSync(release, "");
  const events = () => idle.map((i) => i.event);
  await eventually(() => text(events(), "stderr").includes("between cells over 1000"));
  expect(text(events()).length).toBe(1000);
});

test("print(..., flush=True) right before os._exit reaches the cell's output", async () => {
  const { k } = kernel();
  const died = await run(k, "import os\nprint('last words', flush=True)\nos._exit(1)");
  expect(died.status).toBe("ERROR");
  expect(died.error?.ename).toBe("KernelDied");
  expect(text(died.events)).toBe("last words\n");
});

test("a flush in the child of a cell's fork returns at once (no writer thread survived the fork)", async () => {
  const { k } = kernel();
  const code = [
    "import os, time",
    "t0 = time.monotonic()",
    "pid = os.fork()",
    "if pid == 0:",
    "    print('child', flush=True)",
    "    os._exit(0)",
    "os.waitpid(pid, 0)",
    "print(round(time.monotonic() - t0))",
  ].join("\n");
  const r = await run(k, code);
  expect(r.status).toBe("OK");
  expect(text(r.events)).toBe("0\n");
});
