import { describe, expect, test } from "bun:test";
import { activityRenewMs, createPresence } from "../../src/core/session/presence.ts";
import { manualTimeline } from "../../src/lib/clock.ts";
import { memoryLog } from "../../src/lib/log.ts";

function presence(touch: (id: string) => void = () => {}) {
  const timeline = manualTimeline();
  const touched: string[] = [];
  const log = memoryLog();
  const p = createPresence({
    activity: {
      touch: (id) => {
        touch(id);
        touched.push(id);
      },
    },
    log,
    renewMs: 10_000,
    timers: timeline,
  });
  return { timeline, touched, p, log };
}

describe("presence: when a user counts as present", () => {
  test("a running request: at its start, every period while it runs, at its end, then never", () => {
    const { timeline, touched, p } = presence();
    const end = p.whileRunning("w1");
    expect(touched).toEqual(["w1"]);
    timeline.advance(9_999);
    expect(touched).toHaveLength(1);
    timeline.advance(1);
    timeline.advance(20_000);
    expect(touched).toHaveLength(4);
    end();
    expect(touched).toHaveLength(5);
    // Nothing left armed: an answered request renews nothing, and ending twice is one end.
    expect(timeline.pending()).toBe(0);
    end();
    timeline.advance(60_000);
    expect(touched).toHaveLength(5);
  });

  test("a request that arrives is presence once", () => {
    const { touched, p, timeline } = presence();
    p.seen("w2");
    expect(touched).toEqual(["w2"]);
    expect(timeline.pending()).toBe(0);
  });

  test("a store that cannot write is logged, never thrown at the request", () => {
    const { p, log } = presence(() => {
      throw new Error("database is closed");
    });
    expect(() => p.seen("w3")).not.toThrow();
    expect(() => p.whileRunning("w3")()).not.toThrow();
    expect(log.lines.join("\n")).toContain("database is closed");
  });

  test("one renewal period: a third of the idle timeout, between 250 ms and 10 s", () => {
    const lease = (idleTimeoutSeconds: number | null) => ({
      idleTimeoutSeconds,
      maxLifetimeSeconds: null,
    });
    expect(activityRenewMs(lease(60))).toBe(10_000);
    expect(activityRenewMs(lease(3))).toBe(1_000);
    expect(activityRenewMs(lease(0.1))).toBe(250);
    expect(activityRenewMs(lease(null))).toBe(10_000);
  });
});
