import { describe, expect, test } from "bun:test";
import { every, manualTimeline, sleep, withDeadline } from "../../src/lib/clock.ts";

describe("the timer port's helpers run on any Timers", () => {
  test("every: once a period from now, until cancelled", () => {
    const timeline = manualTimeline();
    let calls = 0;
    const cancel = every(timeline, 1000, () => {
      calls += 1;
    });
    timeline.advance(999);
    expect(calls).toBe(0);
    timeline.advance(2001);
    expect(calls).toBe(3);
    cancel();
    expect(timeline.pending()).toBe(0);
    timeline.advance(5000);
    expect(calls).toBe(3);
  });

  test("every: a cancel from inside the callback stops it", () => {
    const timeline = manualTimeline();
    let calls = 0;
    const cancel = every(timeline, 10, () => {
      calls += 1;
      if (calls === 2) cancel();
    });
    timeline.advance(100);
    expect(calls).toBe(2);
    expect(timeline.pending()).toBe(0);
  });

  test("withDeadline: the work's answer when it comes first, and no timer left", async () => {
    const timeline = manualTimeline();
    expect(await withDeadline(Promise.resolve("done"), 50, () => "late", timeline)).toBe("done");
    expect(timeline.pending()).toBe(0);
  });

  test("withDeadline: the expiry's value when the time passes first", async () => {
    const timeline = manualTimeline();
    const answer = withDeadline(new Promise<string>(() => {}), 50, () => "late", timeline);
    timeline.advance(50);
    expect(await answer).toBe("late");
  });

  test("sleep: resolves when its time comes", async () => {
    const timeline = manualTimeline();
    let woke = false;
    const slept = sleep(30, timeline).then(() => {
      woke = true;
    });
    await Promise.resolve();
    expect(woke).toBe(false);
    timeline.advance(30);
    await slept;
    expect(woke).toBe(true);
  });
});
