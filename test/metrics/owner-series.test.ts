/**
 * Owners on /metrics (issue 22): live workloads and the CPUs and GPUs they hold, by owner,
 * with bounded cardinality: owner values are principal names (admin-made) or `admin`, and
 * past MAX_OWNER_SERIES owners the busiest keep their series and the rest are summed.
 */
import { describe, expect, test } from "bun:test";
import { OTHER_OWNERS, ownerSeries } from "../../src/servers/http/system/metrics-workloads.ts";

describe("series by owner", () => {
  test("an owner's kinds are summed; the admin's own work is `admin`", () => {
    const series = ownerSeries([
      { owner: "alice", kind: "BATCH", count: 2, cpus: 4, gpus: 1 },
      { owner: "alice", kind: "SESSION", count: 1, cpus: 2, gpus: 0 },
      { owner: null, kind: "BATCH", count: 1, cpus: 1, gpus: 0 },
    ]);
    expect(Object.fromEntries(series)).toEqual({
      alice: { sessions: 1, batch: 2, cpus: 6, gpus: 1 },
      admin: { sessions: 0, batch: 1, cpus: 1, gpus: 0 },
    });
  });

  test("past the cap the busiest keep their own series and the rest are summed", () => {
    const rows = Array.from({ length: 500 }, (_, i) => ({
      owner: `p${i}`,
      kind: "BATCH",
      count: i + 1,
      cpus: 1,
      gpus: 0,
    }));
    const series = ownerSeries(rows, 10);
    expect(series.size).toBe(10);
    expect(series.has("p499")).toBe(true);
    expect(series.has("p0")).toBe(false);
    const other = series.get(OTHER_OWNERS);
    expect(other?.cpus).toBe(491);
    const total = [...series.values()].reduce((n, t) => n + t.batch, 0);
    expect(total).toBe((500 * 501) / 2);
  });
});
