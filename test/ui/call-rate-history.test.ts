import { describe, expect, test } from "bun:test";
import { createCallRateHistory } from "../../src/servers/http/ui/call-rate-history.ts";
import { harness } from "../support/api-harness.ts";

describe("scheduler call history", () => {
  test("a point is the growth between two samples per second, within the last hour only", () => {
    const h = createCallRateHistory();
    expect(h.points(0)).toEqual([]);
    h.record(0, 0);
    h.record(30_000, 60);
    h.record(60_000, 60);
    expect(h.points(60_000)).toEqual([
      { atMs: 30_000, perSecond: 2 },
      { atMs: 60_000, perSecond: 0 },
    ]);
    // Two hours on: everything before the window is gone but the one sample it starts from.
    for (let t = 90_000; t <= 7_200_000; t += 30_000) h.record(t, 60 + t / 1000);
    const points = h.points(7_200_000);
    expect(points.length).toBe(120);
    expect(points.every((p) => p.atMs > 3_600_000 && p.perSecond === 1)).toBe(true);
    expect(h.since()).toBe(0);
  });

  test("a counter that went back (a restart) counts from zero, never negative", () => {
    const h = createCallRateHistory();
    h.record(0, 500);
    h.record(10_000, 20);
    expect(h.points(10_000)).toEqual([{ atMs: 10_000, perSecond: 2 }]);
  });
});

describe("the cluster page's chart", () => {
  test("an SVG line once two samples exist; before that, it says it is collecting", async () => {
    const history = createCallRateHistory();
    const h = harness({ schedulerCallHistory: history });
    try {
      const now = h.clock.now();
      history.record(now - 120_000, 0);
      const early = await (await h.request("/ui/cluster")).text();
      expect(early).toContain("collecting since");
      expect(early).not.toContain("<polyline");
      history.record(now - 60_000, 120);
      history.record(now, 180);
      const html = await (await h.request("/ui/cluster")).text();
      const line = /<polyline points="([^"]+)"/.exec(html)?.[1] ?? "";
      expect(line.split(" ").length).toBe(2);
      expect(html).toContain("peak 2.00, mean 1.50");
    } finally {
      h.close();
    }
  });

  test("a daemon that records no history says so instead of drawing an empty chart", async () => {
    const h = harness();
    try {
      const html = await (await h.request("/ui/cluster")).text();
      expect(html).toContain("records no call history");
      expect(html).not.toContain("<svg");
    } finally {
      h.close();
    }
  });
});
