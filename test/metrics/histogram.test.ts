import { describe, expect, test } from "bun:test";
import { createHistogram, createLabelledHistograms } from "../../src/adapters/metrics/histogram.ts";

describe("histogram", () => {
  test("cumulative buckets with le inclusive, +Inf last, sum and count", () => {
    const h = createHistogram([0.1, 1, 10]);
    for (const v of [0.05, 0.1, 0.5, 1, 3, 100]) h.observe(v);
    // le=0.1 holds 0.05 and 0.1 (upper bound inclusive, as Prometheus defines le).
    expect(h.cumulativeCounts()).toEqual([2, 4, 5, 6]);
    expect(h.count()).toBe(6);
    expect(h.sumSeconds()).toBeCloseTo(104.65, 10);
  });

  test("a value that is not finite is dropped, not counted in +Inf or the sum", () => {
    const h = createHistogram([1]);
    h.observe(Number.NaN);
    h.observe(Number.POSITIVE_INFINITY);
    expect(h.count()).toBe(0);
    expect(h.sumSeconds()).toBe(0);
  });

  test("bounds that do not ascend are a bug, refused at creation", () => {
    expect(() => createHistogram([1, 1])).toThrow(/ascend/);
    expect(() => createHistogram([2, 1])).toThrow(/ascend/);
  });

  test("labelled: one histogram per label value, the same one on every get", () => {
    const byProfile = createLabelledHistograms([1, 10]);
    byProfile.get("gpu").observe(5);
    byProfile.get("gpu").observe(50);
    byProfile.get("default").observe(0.5);
    const seen = Object.fromEntries(
      [...byProfile.entries()].map(([k, h]) => [k, h.cumulativeCounts()]),
    );
    expect(seen).toEqual({ gpu: [0, 1, 2], default: [1, 1, 1] });
  });

  test("observing allocates nothing measurable (the tick observes per step)", () => {
    const h = createHistogram([0.001, 0.01, 0.1, 1, 10]);
    for (let i = 0; i < 10_000; i++) h.observe(i / 1000); // warm up the JIT
    Bun.gc(true);
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 1_000_000; i++) h.observe((i % 20_000) / 1000);
    const grownBytes = process.memoryUsage().heapUsed - before;
    // A boxed number or a label string per observation would be tens of megabytes here.
    expect(grownBytes).toBeLessThan(2_000_000);
    expect(h.count()).toBe(1_010_000);
  });
});
