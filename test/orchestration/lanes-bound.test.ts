/**
 * The lanes never run more backend commands at once than configured: the bound is what keeps
 * a hanging controller from collecting one stuck sbatch/scancel per tick.
 */
import { describe, expect, test } from "bun:test";
import { createLanes } from "../../src/core/reconciler/lanes.ts";
import { memoryLog } from "../../src/lib/log.ts";
import { harnessPerTest } from "../support/reconciler-harness.ts";

const make = harnessPerTest();

/** A lane body that stays in flight until `release()`. */
function held() {
  const waiting: (() => void)[] = [];
  return {
    work: () => new Promise<void>((resolve) => waiting.push(resolve)),
    release: () => {
      for (const r of waiting.splice(0)) r();
    },
  };
}

describe("the lanes' bound", () => {
  test("with every lane taken, none has room, whatever its kind", async () => {
    const lanes = createLanes({ maxInFlight: 3, log: memoryLog(), onSettled: () => {} });
    const h = held();
    lanes.start("submit", ["a1"], h.work);
    lanes.start("submit", ["a2"], h.work);
    // Submissions take all but one lane; the last is a cancel's.
    expect(lanes.hasRoom("submit")).toBe(false);
    expect(lanes.hasRoom("cancel")).toBe(true);
    lanes.start("cancel", ["a3"], h.work);
    expect(lanes.inFlight).toBe(3);
    expect(lanes.hasRoom("cancel")).toBe(false);
    expect(lanes.hasRoom("submit")).toBe(false);
    h.release();
    await lanes.idle();
    expect(lanes.hasRoom("cancel")).toBe(true);
  });

  test("the reconciler never has more commands in flight than maxCommandsInFlight", async () => {
    const h = make({ maxCommandsInFlight: 2 });
    const first = h.addWorkload();
    const second = h.addWorkload();
    await h.tick();
    const cancels = held();
    let cancelCalls = 0;
    let holding = true;
    const cancel = h.sim.backend.cancel.bind(h.sim.backend);
    h.sim.backend.cancel = async (targets) => {
      cancelCalls += 1;
      if (holding) await cancels.work();
      return cancel(targets);
    };
    h.sim.holdNextSubmit();
    h.addWorkload();
    await h.tickNoWait();
    h.stop(first);
    await h.tickNoWait();
    expect(h.reconciler.commandsInFlight()).toBe(2);
    h.stop(second);
    await h.tickNoWait();
    await h.tickNoWait();
    expect(cancelCalls).toBe(1);
    expect(h.reconciler.commandsInFlight()).toBe(2);

    holding = false;
    cancels.release();
    h.sim.settleHeld("land");
    await h.reconciler.idle();
    for (let i = 0; i < 5 && h.workload(second).phase !== "CANCELLED"; i++) await h.tick();
    expect(h.workload(second).phase).toBe("CANCELLED");
  });
});
