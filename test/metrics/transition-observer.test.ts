/**
 * The workload figures come from the reconciler's own applied writes: a real reconciler on a
 * real store and the simulated backend, with the store wrapped as the composition wraps it.
 */
import { afterEach, describe, expect, test } from "bun:test";
import {
  createDaemonMetrics,
  type DaemonMetrics,
} from "../../src/adapters/metrics/daemon-metrics.ts";
import { observeTransitions } from "../../src/adapters/metrics/transition-observer.ts";
import { type Harness, harness } from "../support/reconciler-harness.ts";

let open: Harness | null = null;
afterEach(() => {
  open?.close();
  open = null;
});

function make(): { h: Harness; metrics: DaemonMetrics } {
  const metrics = createDaemonMetrics();
  const h = harness({ wrapStore: (store) => observeTransitions(store, metrics).store });
  open = h;
  return { h, metrics };
}

function ends(metrics: DaemonMetrics) {
  return [...metrics.ends.entries()];
}

describe("figures from applied transitions", () => {
  test("submit latency, queue wait by profile, and one end counted once", async () => {
    const { h, metrics } = make();
    const { id } = h.admit();
    await h.tick();
    const [submitted] = h.allocations(id);
    expect(submitted?.phase).toBe("QUEUED");
    expect(metrics.submitLatency.count()).toBe(1);
    expect(metrics.submitLatency.sumSeconds()).toBe(
      ((submitted?.submittedAt ?? 0) - h.workload(id).createdAt) / 1000,
    );

    h.clock.advance(30_000);
    h.sim.start(submitted?.handle as never);
    await h.tick();
    const [running] = h.allocations(id);
    expect(running?.phase).toBe("RUNNING");
    const wait = metrics.queueWait.get("default");
    expect(wait.count()).toBe(1);
    expect(wait.sumSeconds()).toBe(
      ((running?.startedAt ?? 0) - (running?.submittedAt ?? 0)) / 1000,
    );
    expect(wait.sumSeconds()).toBeGreaterThanOrEqual(30);

    h.sim.finish(running?.handle as never, { phase: "FAILED", exitCode: 3 });
    await h.tick();
    await h.tick();
    expect(h.workload(id).phase).toBe("FAILED");
    expect(ends(metrics)).toEqual([
      { kind: "BATCH", phase: "FAILED", reason: h.workload(id).reason ?? "", value: 1 },
    ]);
    // Nothing observed twice: later ticks see the same ended workload and write nothing.
    expect(metrics.submitLatency.count()).toBe(1);
    expect(wait.count()).toBe(1);
  });

  test("a cancel ends CANCELLED with its reason", async () => {
    const { h, metrics } = make();
    const { id } = h.admit();
    await h.tick();
    h.stop(id);
    for (let i = 0; i < 4 && h.workload(id).phase !== "CANCELLED"; i++) await h.tick();
    expect(h.workload(id).phase).toBe("CANCELLED");
    expect(ends(metrics)).toEqual([
      { kind: "BATCH", phase: "CANCELLED", reason: "USER_CANCELLED", value: 1 },
    ]);
  });
});
