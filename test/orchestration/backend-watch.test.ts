import { describe, expect, test } from "bun:test";
import { createBackendWatch } from "../../src/core/reconciler/watch.ts";

function setup() {
  let nowMs = 0;
  const watch = createBackendWatch({ slowCallMs: 1000, monotonicMs: () => nowMs });
  return {
    watch,
    advance: (ms: number) => {
      nowMs += ms;
    },
  };
}

describe("backend call watch", () => {
  test("a call in flight past the threshold is degraded at once, before it fails", () => {
    const { watch, advance } = setup();
    const done = watch.begin("observe");
    advance(999);
    expect(watch.health().kind).toBe("Healthy");
    advance(2);
    expect(watch.health()).toEqual({
      kind: "Degraded",
      message: "a observe call has waited 1001 ms for an answer",
    });
    done(true);
    expect(watch.health().kind).toBe("Healthy");
  });

  test("a call without an answer stays degraded until a later call answers", () => {
    const { watch } = setup();
    watch.begin("observe")(false);
    expect(watch.health().kind).toBe("Degraded");
    watch.begin("findByToken")(true);
    expect(watch.health().kind).toBe("Healthy");
  });

  test("calls per second over the last minute, and totals by operation", () => {
    const { watch, advance } = setup();
    for (let i = 0; i < 30; i++) {
      watch.begin("observe")(true);
      advance(2000);
    }
    expect(watch.callsPerSecond()).toBeCloseTo(0.5, 5);
    advance(120_000);
    expect(watch.callsPerSecond()).toBe(0);
    expect(watch.totals().observe).toBe(30);
    expect(watch.totals().submit).toBe(0);
  });
});
