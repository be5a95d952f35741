/**
 * The Python kernel, against a real interpreter. One kernel per describe block where state
 * carrying over is the point; a fresh one where a test breaks it on purpose.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { memoryLog } from "../../src/log.ts";
import { createKernel, type Kernel } from "../../src/worker/kernel.ts";
import { realPython, tempDir, until } from "./gateway-harness.ts";

const opened: Kernel[] = [];
function kernel(options: { maxOutputChars?: number; python?: string; cwd?: string } = {}) {
  const k = createKernel({ log: memoryLog(), ...options });
  opened.push(k);
  return k;
}
/** Where the interpreter is not the point, skip a version-manager shim's start-up cost. */
function fastKernel(options: { maxOutputChars?: number; cwd?: string } = {}) {
  const k = createKernel({ log: memoryLog(), python: realPython(), ...options });
  opened.push(k);
  return k;
}
afterAll(async () => {
  for (const k of opened.splice(0)) await k.close();
});

describe("a notebook-like session", () => {
  const k = kernel(); // the default interpreter: `python3` on PATH

  test("state survives between cells; the last expression's repr is the value", async () => {
    expect(await k.exec("x = 41")).toEqual({
      status: "OK",
      output: "",
      stderr: "",
      value: null,
      error: null,
    });
    expect((await k.exec("x + 1")).value).toBe("42");
    expect((await k.exec("def f(s):\n    return s * 2\nf('ab')")).value).toBe("'abab'");
    expect((await k.exec("import math\nmath.pi > 3")).value).toBe("True");
    expect((await k.exec("_")).value).toBe("True"); // the previous value, as in a notebook
  });

  test("None and statements give no value", async () => {
    expect((await k.exec("None")).value).toBeNull();
    expect((await k.exec("y = [1, 2]")).value).toBeNull();
    expect((await k.exec("y.append(3)")).value).toBeNull();
    expect((await k.exec("y")).value).toBe("[1, 2, 3]");
  });

  test("stdout and stderr are captured separately", async () => {
    const r = await k.exec(
      "import sys\nprint('out 1')\nprint('err 1', file=sys.stderr)\nprint('out 2')",
    );
    expect(r).toMatchObject({ status: "OK", output: "out 1\nout 2\n", stderr: "err 1\n" });
  });

  test("an error returns the traceback of the user's code, and what was printed before it", async () => {
    const r = await k.exec("print('before')\ndef g():\n    return 1 / 0\ng()");
    expect(r.status).toBe("ERROR");
    expect(r.output).toBe("before\n");
    expect(r.value).toBeNull();
    expect(r.error).toContain("Traceback (most recent call last)");
    expect(r.error).toContain("ZeroDivisionError: division by zero");
    expect(r.error).toContain("return 1 / 0"); // source lines are shown
    expect(r.error).not.toContain("exec(body"); // the kernel's own frames are not
    // The kernel survived and kept its state.
    expect((await k.exec("x")).value).toBe("41");
  });

  test("a syntax error is an ERROR, not a dead kernel", async () => {
    const r = await k.exec("def broken(:\n    pass");
    expect(r.status).toBe("ERROR");
    expect(r.error).toContain("SyntaxError");
    expect((await k.exec("x")).value).toBe("41");
  });

  test("SystemExit and input() do not take the kernel down", async () => {
    expect((await k.exec("import sys; sys.exit(3)")).error).toContain("SystemExit: 3");
    expect((await k.exec("input()")).error).toContain("EOFError");
    expect((await k.exec("x")).value).toBe("41");
  });

  test("user code cannot corrupt the protocol: fd-level writes and reads miss it", async () => {
    const r = await k.exec(
      "import os, subprocess\nos.write(1, b'{\"id\": 999}\\n')\nsubprocess.run(['cat'])\nsubprocess.run(['echo', 'hello'])\n'still fine'",
    );
    expect(r).toMatchObject({ status: "OK", value: "'still fine'" });
    expect((await k.exec("x")).value).toBe("41");
  });

  test("cells run one at a time, in the order they were asked for", async () => {
    const results = await Promise.all([
      k.exec("import time\ntime.sleep(0.2)\norder = ['slow']"),
      k.exec("order.append('fast')\norder"),
    ]);
    expect(results[1].value).toBe("['slow', 'fast']");
  });

  test("interrupt stops a running cell with KeyboardInterrupt; idle, it does nothing", async () => {
    expect(k.interrupt()).toBe(false);
    const running = k.exec("import time\nfor i in range(100):\n    time.sleep(0.1)");
    await Bun.sleep(300);
    expect(k.interrupt()).toBe(true);
    const r = await running;
    expect(r.status).toBe("ERROR");
    expect(r.error).toContain("KeyboardInterrupt");
    expect(r.error).not.toContain("on_sigint");
    expect((await k.exec("x")).value).toBe("41");
  });
});

describe("limits and failures", () => {
  afterEach(async () => {
    for (const k of opened.splice(0)) await k.close();
  });

  test("output beyond the cap is cut, with the count of what was dropped", async () => {
    const k = fastKernel({ maxOutputChars: 1000 });
    const r = await k.exec("print('a' * 5000)\n'b' * 3000");
    expect(r.output.startsWith("a".repeat(1000))).toBe(true);
    expect(r.output).toContain("4001 more characters not shown");
    expect(r.value!.length).toBeLessThan(1100);
    expect(r.value).toContain("more characters not shown");
  });

  test("a kernel that dies answers ERROR, and the next cell gets a fresh one", async () => {
    const k = fastKernel();
    await k.exec("x = 1");
    const died = await k.exec("import os\nos._exit(7)");
    expect(died.status).toBe("ERROR");
    expect(died.error).toContain("exit code 7");
    const fresh = await k.exec("x");
    expect(fresh.status).toBe("ERROR");
    expect(fresh.error).toContain("NameError");
    expect((await k.exec("1 + 1")).value).toBe("2");
  });

  test("a missing interpreter is an ERROR answer, not a crash", async () => {
    const k = kernel({ python: "/nonexistent/python3" });
    const r = await k.exec("1");
    expect(r.status).toBe("ERROR");
    expect(r.error).toContain("cannot start the Python kernel");
  });

  test("runs in the given working directory", async () => {
    const dir = tempDir();
    const k = fastKernel({ cwd: dir });
    expect((await k.exec("import os\nos.getcwd()")).value).toBe(
      JSON.stringify(dir).replaceAll('"', "'"),
    );
  });

  test("close kills the interpreter and whatever it started", async () => {
    const dir = tempDir();
    const k = fastKernel();
    const pidFile = join(dir, "child.pid");
    await k.exec(
      `import subprocess\np = subprocess.Popen(['sleep', '300'])\nopen(${JSON.stringify(pidFile)}, 'w').write(str(p.pid))`,
    );
    const childPid = Number(readFileSync(pidFile, "utf8"));
    expect(alive(childPid)).toBe(true);
    await k.close();
    expect(await until(() => !alive(childPid), 3000)).toBe(true);
    expect((await k.exec("1")).error).toContain("shut down");
  });
});

function alive(pid: number): boolean {
  // A zombie still answers kill(0); it is dead for our purposes.
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = `/proc/${pid}/stat`;
  return existsSync(stat) && !/\) Z /.test(readFileSync(stat, "utf8"));
}
