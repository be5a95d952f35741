/**
 * `openai4s exec ID 'x + 1'` in a terminal: the value of the last expression is printed like
 * `print` would, on its own line, not glued to the shell prompt that follows.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createExecCommand } from "../../src/apps/cli/exec.ts";
import type { ExecOutput } from "../../src/core/session/session-port.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { captureIo, runtimeFor } from "../support/cli-runtime.ts";
import { fakeBackend } from "../support/fake-backend.ts";
import { tempDirs } from "../support/temp-dir.ts";

let h: Harness;
afterEach(() => h?.close());

test("exec ends its output with a newline, and adds none to an empty output", async () => {
  let outputs: ExecOutput[] = [{ type: "execute_result", data: { "text/plain": "42" } }];
  h = harness({
    backend: fakeBackend({
      capabilities: {
        sessionIsolation: {
          verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }),
        },
      },
    }),
    sessions: {
      exec: async (_id, _code, options) => {
        options?.onStart?.();
        for (const o of outputs) options?.onOutput?.(o);
        return {
          kind: "Ok",
          status: "OK",
          output: "",
          error: null,
          outputs,
          kernelRestarted: false,
        };
      },
      interrupt: async () => ({ kind: "Ok", interrupted: false }),
      restart: async () => ({ kind: "Ok", running: true, message: "the interpreter is running" }),
    },
  });
  const res = await h.post("/v1/workloads", { kind: "SESSION", profile: "interactive" });
  const { id } = (await res.json()) as { id: string };
  const run = async () => {
    const io = captureIo();
    expect(await createExecCommand(runtimeFor(h)).run([id, "x"], io)).toBe(0);
    return io.out();
  };
  expect(await run()).toBe("42\n");
  outputs = [{ type: "stream", name: "stdout", text: "hello\n" }];
  expect(await run()).toBe("hello\n");
  outputs = [];
  expect(await run()).toBe("");
});

describe("--save-images DIR", () => {
  const png = Buffer.from("\x89PNG fake image");
  const dirs = tempDirs("o4s-save-images-", "each");
  let ran = 0;
  /** A session whose every exec displays one PNG; `during` runs while the code "runs". */
  async function sessionShowingAnImage(during: () => void = () => {}): Promise<string> {
    ran = 0;
    const outputs: ExecOutput[] = [
      {
        type: "display_data",
        data: { "text/plain": "<Figure>", "image/png": png.toString("base64") },
      },
    ];
    h = harness({
      backend: fakeBackend({
        capabilities: {
          sessionIsolation: {
            verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }),
          },
        },
      }),
      sessions: {
        exec: async (_id, _code, options) => {
          ran += 1;
          options?.onStart?.();
          during();
          for (const o of outputs) options?.onOutput?.(o);
          return {
            kind: "Ok",
            status: "OK",
            output: "",
            error: null,
            outputs,
            kernelRestarted: false,
          };
        },
        interrupt: async () => ({ kind: "Ok", interrupted: false }),
        restart: async () => ({ kind: "Ok", running: true, message: "the interpreter is running" }),
      },
    });
    const res = await h.post("/v1/workloads", { kind: "SESSION", profile: "interactive" });
    return ((await res.json()) as { id: string }).id;
  }

  for (const json of [false, true]) {
    const mode = json ? "with --json" : "streaming";
    test(`${mode}: a missing DIR is created and the image lands in it`, async () => {
      const id = await sessionShowingAnImage();
      const dir = join(dirs(), "plots", "today");
      const io = captureIo();
      const args = [id, "plt.plot()", "--save-images", dir, ...(json ? ["--json"] : [])];
      expect(await createExecCommand(runtimeFor(h)).run(args, io)).toBe(0);
      const saved = readdirSync(dir);
      expect(saved).toHaveLength(1);
      expect(readFileSync(join(dir, saved[0] as string))).toEqual(png);
    });

    test(`${mode}: an image that cannot be written exits 1, naming it`, async () => {
      const dir = join(dirs(), "plots");
      // The directory vanishes while the code runs: the figure is lost, so no exit 0.
      const id = await sessionShowingAnImage(() => rmSync(dir, { recursive: true }));
      const io = captureIo();
      const args = [id, "plt.plot()", "--save-images", dir, ...(json ? ["--json"] : [])];
      expect(await createExecCommand(runtimeFor(h)).run(args, io)).toBe(1);
      expect(io.err()).toContain(`cannot save an image to ${dir}/`);
    });
  }

  test("a DIR that cannot be created exits 1 before any code runs", async () => {
    const id = await sessionShowingAnImage();
    const file = join(dirs(), "a-file");
    writeFileSync(file, "");
    const io = captureIo();
    const code = await createExecCommand(runtimeFor(h)).run(
      [id, "plt.plot()", "--save-images", join(file, "plots")],
      io,
    );
    expect(code).toBe(1);
    expect(io.err()).toContain(`--save-images: cannot create ${file}/plots`);
    expect(ran).toBe(0);
  });
});
