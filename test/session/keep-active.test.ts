import { describe, expect, test } from "bun:test";
import { keepActiveWhileRunning } from "../../src/core/session/keep-active.ts";
import type { ExecOutcome, SessionService } from "../../src/core/session/session-service.ts";
import { manualTimeline } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";

/** A cell that runs until the test ends it, on a timeline the test moves. */
function running() {
  const timeline = manualTimeline();
  const touched: string[] = [];
  let finish: (outcome: ExecOutcome) => void = () => {};
  const service: SessionService = {
    exec: () =>
      new Promise<ExecOutcome>((resolve) => {
        finish = resolve;
      }),
    interrupt: async () => ({ kind: "Ok", interrupted: false }),
    restart: async () => ({ kind: "NotFound" }),
  };
  const kept = keepActiveWhileRunning(service, {
    activity: { touch: (id) => touched.push(id) },
    log: memoryLog(),
    renewMs: 10_000,
    timers: timeline,
  });
  return { timeline, touched, kept, finish: (o: ExecOutcome) => finish(o) };
}

describe("a running cell keeps its session active", () => {
  test("renews every period while the cell runs, and stops renewing when it answers", async () => {
    const { timeline, touched, kept, finish } = running();
    const exec = kept.exec("w1", "while True: pass");
    timeline.advance(9_999);
    expect(touched).toEqual([]);
    timeline.advance(1);
    timeline.advance(20_000);
    expect(touched).toEqual(["w1", "w1", "w1"]);
    finish({ kind: "NotFound" });
    await exec;
    // Nothing left armed: an answered cell renews nothing.
    expect(timeline.pending()).toBe(0);
    timeline.advance(60_000);
    expect(touched).toHaveLength(3);
  });
});
