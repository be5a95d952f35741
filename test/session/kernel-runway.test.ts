/**
 * The kernel's runway helper: `time_remaining()` in every cell, from OPENAI4S_DEADLINE in the
 * environment the kernel inherits. Each case runs in a child process started with that
 * environment: a spawned kernel inherits the environment the process started with.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { realPython } from "../support/gateway-harness.ts";

async function remainingWith(env: Record<string, string>): Promise<string> {
  const kernelModule = join(import.meta.dir, "../../src/apps/worker/kernel.ts");
  const logModule = join(import.meta.dir, "../../src/lib/log.ts");
  const script = `
    const { createKernel } = await import(${JSON.stringify(kernelModule)});
    const { memoryLog } = await import(${JSON.stringify(logModule)});
    const k = createKernel({ log: memoryLog(), python: ${JSON.stringify(realPython())} });
    let printed = "";
    await k.exec("print(time_remaining())", {
      onEvent: (e) => {
        if (e.type === "stream") printed += e.text;
      },
    });
    await k.close();
    process.stdout.write(printed);
  `;
  const child = Bun.spawn([process.execPath, "--eval", script], {
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = await new Response(child.stdout).text();
  expect(await child.exited).toBe(0);
  return out.trim();
}

describe("time_remaining()", () => {
  test("counts down to the deadline the job was given", async () => {
    const deadline = Math.floor(Date.now() / 1000) + 3600;
    const left = Number(await remainingWith({ OPENAI4S_DEADLINE: String(deadline) }));
    expect(left).toBeGreaterThan(3500);
    expect(left).toBeLessThanOrEqual(3600);
  });

  test("is None without a deadline, or with one that is not a number", async () => {
    expect(await remainingWith({})).toBe("None");
    expect(await remainingWith({ OPENAI4S_DEADLINE: "soon" })).toBe("None");
  });
});
