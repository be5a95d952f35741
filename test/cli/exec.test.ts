/**
 * `openai4s exec ID 'x + 1'` in a terminal: the value of the last expression is printed like
 * `print` would, on its own line, not glued to the shell prompt that follows.
 */
import { afterEach, expect, test } from "bun:test";
import { createExecCommand } from "../../src/cli/exec.ts";
import type { ExecOutput } from "../../src/orchestration/session/session-service.ts";
import { type Harness, harness } from "../support/api-harness.ts";
import { captureIo, runtimeFor } from "../support/cli-runtime.ts";
import { fakeBackend } from "../support/fake-backend.ts";

let h: Harness;
afterEach(() => h?.close());

test("exec ends its output with a newline, and adds none to an empty output", async () => {
  let outputs: ExecOutput[] = [{ type: "execute_result", data: { "text/plain": "42" } }];
  h = harness({
    backend: fakeBackend({
      verifySessionIsolation: async () => ({ kind: "Verified", mechanism: "test" }),
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
