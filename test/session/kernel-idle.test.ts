/**
 * What the kernel keeps of its output between cells for the next plain exec: bounded, and a
 * line says how many outputs were not kept, so the loss is never silent.
 */
import { expect, test } from "bun:test";
import { createIdleOutput } from "../../src/apps/worker/kernel-idle.ts";
import { memoryLog } from "../../src/lib/log.ts";
import type { CellEvent } from "../../src/wire/worker-protocol.ts";

test("kept up to the bound, the rest counted; all of it passed on live, named by the cell before", () => {
  const live: [CellEvent, string | undefined][] = [];
  const idle = createIdleOutput({
    maxKeptChars: 10,
    onIdleEvent: (event, cell) => live.push([event, cell]),
    log: memoryLog(),
  });
  idle.started(3, "cell-3");
  const out = (text: string): CellEvent => ({ type: "stream", name: "stdout", text });
  idle.received(out("12345"), 3);
  idle.received(out("67890"), 3);
  idle.received(out("x"), 3);
  idle.received({ type: "display_data", data: { "text/plain": "a figure" } }, 3);
  expect(live.map(([, cell]) => cell)).toEqual(["cell-3", "cell-3", "cell-3", "cell-3"]);
  expect(idle.take()).toEqual([
    out("12345"),
    out("67890"),
    {
      type: "stream",
      name: "stderr",
      text: "\n[... 2 more outputs between cells not kept: over 10 characters]\n",
    },
  ]);
  expect(idle.take()).toEqual([]);
});
