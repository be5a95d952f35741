import { describe, expect, test } from "bun:test";
import { createLoopSchedule } from "../../src/core/reconciler/schedule.ts";

/** The schedule alone, on a monotonic clock the test moves: what runs next, and when. */
function schedule() {
  let nowMs = 0;
  const s = createLoopSchedule({
    minIntervalMs: 1000,
    maxIntervalMs: 8000,
    submitBatchMs: 50,
    monotonicMs: () => nowMs,
  });
  return {
    s,
    at(ms: number) {
      nowMs = ms;
    },
    /** Runs a quiet tick now (nothing changed); returns the next step. */
    quietTick() {
      const { stirred } = s.tickStarted();
      s.tickEnded(stirred, null);
      return s.next();
    },
  };
}

describe("the loop's schedule", () => {
  test("the first tick is due at once; quiet ticks double the period up to the maximum", () => {
    const { s, at, quietTick } = schedule();
    expect(s.next()).toEqual({ step: "tick", atMs: Number.NEGATIVE_INFINITY });
    const due: number[] = [];
    for (let i = 0; i < 5; i++) {
      const next = quietTick();
      due.push(next.atMs);
      at(next.atMs);
    }
    expect(due).toEqual([2000, 6000, 14_000, 22_000, 30_000]);
  });

  test("a wake asks for a pass now and pulls the tick to the minimum after the last one", () => {
    const { s, at, quietTick } = schedule();
    at(0);
    quietTick(); // period 2000: the next tick at 2000
    at(300);
    s.wake();
    expect(s.next()).toEqual({ step: "pass", atMs: Number.NEGATIVE_INFINITY });
    s.passStarted();
    // The tick: one minimum after the last, not two.
    expect(s.next()).toEqual({ step: "tick", atMs: 1000 });
    // Another wake 10 ms after the pass: passes closer than the batch window share one.
    at(310);
    s.wake();
    expect(s.next()).toEqual({ step: "pass", atMs: 350 });
  });

  test("an event brings the period back to the minimum, even one during the tick", () => {
    const { s, at } = schedule();
    at(0);
    s.tickStarted();
    s.wake(); // during the tick
    s.tickEnded(false, null);
    expect(s.next()).toEqual({ step: "pass", atMs: Number.NEGATIVE_INFINITY });
    s.passStarted();
    expect(s.next()).toEqual({ step: "tick", atMs: 1000 });
    at(1000);
    const { stirred } = s.tickStarted();
    expect(stirred).toBe(true);
    expect(s.tickEnded(stirred, null)).toBe(1000);
  });

  test("a settled submission: the tick within the minimum from now, and a pass", () => {
    const { s, at, quietTick } = schedule();
    at(0);
    quietTick();
    at(1500);
    quietTick(); // period 4000 from 1500: due at 5500
    at(2000);
    s.submissionSettled();
    s.passStarted();
    expect(s.next()).toEqual({ step: "tick", atMs: 3000 });
  });

  test("a warning coming due pulls the tick to it, never closer than the minimum", () => {
    const { s, at } = schedule();
    at(0);
    s.tickStarted();
    s.tickEnded(false, 1500);
    expect(s.next()).toEqual({ step: "tick", atMs: 1500 });
    at(1500);
    s.tickStarted();
    s.tickEnded(false, 1600);
    expect(s.next()).toEqual({ step: "tick", atMs: 2500 });
  });

  test("a tick answers the passes asked before it", () => {
    const { s, at } = schedule();
    at(0);
    s.wake();
    s.tickStarted();
    s.tickEnded(true, null);
    expect(s.next()).toEqual({ step: "tick", atMs: 1000 });
  });
});
