/**
 * The stdout writer (process-output.ts) starts one write at a time: what is written while a
 * write is in flight waits, then goes out in one write. Bun.write to a pipe returns before
 * a slow reader took the bytes; order must not depend on how the runtime queues two of them.
 */
import { expect, test } from "bun:test";
import { stdoutWriter } from "../../src/lib/command/process-output.ts";

test("one write in flight at a time; what came meanwhile follows in one write, in order", async () => {
  const started: string[] = [];
  const finish: (() => void)[] = [];
  const out = stdoutWriter((text) => {
    started.push(text);
    return new Promise<number>((resolve) => finish.push(() => resolve(text.length)));
  });
  out("a\n");
  out("b\n");
  out("c\n");
  expect(started).toEqual(["a\n"]);
  finish.shift()?.();
  await Bun.sleep(0);
  expect(started).toEqual(["a\n", "b\nc\n"]);
  out("d\n");
  finish.shift()?.();
  await Bun.sleep(0);
  expect(started).toEqual(["a\n", "b\nc\n", "d\n"]);
  finish.shift()?.();
  await Bun.sleep(0);
  out("e\n");
  expect(started).toEqual(["a\n", "b\nc\n", "d\n", "e\n"]);
});
