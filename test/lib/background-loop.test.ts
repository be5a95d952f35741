/** The background loop behind the orphan sweep and the site's MaxArraySize read. */
import { describe, expect, test } from "bun:test";
import { backgroundLoop } from "../../src/lib/background-loop.ts";
import { manualTimeline } from "../../src/lib/clock.ts";

/** Lets the loop's promise callbacks (a run's end, the next schedule) run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

describe("a background loop", () => {
  test("runs at start, then after each run's delay; null ends it", async () => {
    const timeline = manualTimeline();
    const answers: (number | null)[] = [1000, 500, null];
    let runs = 0;
    const loop = backgroundLoop({
      timers: timeline,
      run: async () => {
        runs += 1;
        return answers.shift() ?? null;
      },
      onError: () => {},
      afterErrorMs: 60_000,
    });
    expect(runs).toBe(0);
    loop.start();
    timeline.advance(0);
    await settle();
    expect(runs).toBe(1);
    timeline.advance(999);
    await settle();
    expect(runs).toBe(1);
    timeline.advance(1);
    await settle();
    expect(runs).toBe(2);
    timeline.advance(500);
    await settle();
    expect(runs).toBe(3);
    expect(timeline.pending()).toBe(0);
    await loop.stop();
  });

  test("a run that throws is reported and tried again after afterErrorMs", async () => {
    const timeline = manualTimeline();
    const errors: unknown[] = [];
    let runs = 0;
    const loop = backgroundLoop({
      timers: timeline,
      run: async () => {
        runs += 1;
        if (runs === 1) throw new Error("broken");
        return null;
      },
      onError: (error) => errors.push(error),
      afterErrorMs: 2000,
    });
    loop.start();
    timeline.advance(0);
    await settle();
    expect(errors.map(String)).toEqual(["Error: broken"]);
    timeline.advance(1999);
    await settle();
    expect(runs).toBe(1);
    timeline.advance(1);
    await settle();
    expect(runs).toBe(2);
    await loop.stop();
  });

  test("stop waits for the run in progress, and nothing runs after it", async () => {
    const timeline = manualTimeline();
    let release = () => {};
    let runs = 0;
    const loop = backgroundLoop({
      timers: timeline,
      run: () => {
        runs += 1;
        return new Promise<number>((resolve) => {
          release = () => resolve(10);
        });
      },
      onError: () => {},
      afterErrorMs: 10,
    });
    loop.start();
    timeline.advance(0);
    let stopped = false;
    const stopping = loop.stop().then(() => {
      stopped = true;
    });
    await settle();
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(timeline.pending()).toBe(0);
    timeline.advance(1000);
    await settle();
    expect(runs).toBe(1);
  });
});
