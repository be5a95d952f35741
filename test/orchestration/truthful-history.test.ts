/**
 * The history a workload shows is what happened: a job first seen after it ended still shows
 * that it ran (with the start the backend observed), a stopped session's allocation ends
 * CANCELLED with the stop's reason rather than COMPLETED/0, the workload carries an exit code
 * only when the job ended on its own, and a new reason while queued (HELD, ...) is recorded.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { listEvents } from "../../src/adapters/store-sqlite/index.ts";
import type { Allocation } from "../../src/core/models.ts";
import { type Harness, harness } from "../support/reconciler-harness.ts";

const open: Harness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.close();
});

function make(): Harness {
  const h = harness();
  open.push(h);
  return h;
}

function only(h: Harness, id: string): Allocation {
  const all = h.allocations(id);
  expect(all).toHaveLength(1);
  return all[0] as Allocation;
}

describe("truthful history", () => {
  test("a job first seen already ended gets its RUNNING event, at the observed start", async () => {
    const h = make();
    const id = h.addWorkload();
    await h.tick();
    const handle = only(h, id).handle!;
    h.sim.start(handle);
    const startedAt = h.sim.job(handle)?.startedAt ?? null;
    expect(startedAt).not.toBeNull();
    h.sim.finish(handle, { phase: "COMPLETED", exitCode: 0 });
    await h.tick();
    expect(h.phases(id)).toEqual(["PENDING", "SUBMITTING", "QUEUED", "RUNNING", "COMPLETED"]);
    const running = listEvents(h.deps, id).find((e) => e.phase === "RUNNING");
    expect(running?.at).toBe(startedAt as number);
    expect(running?.reason).toBe("STARTED");
    expect(only(h, id).startedAt).toBe(startedAt as number);
  });

  test("a job that never started gets no RUNNING event", async () => {
    const h = make();
    const id = h.addWorkload();
    await h.tick();
    h.sim.finish(only(h, id).handle!, { phase: "FAILED", exitCode: 2 });
    await h.tick();
    expect(h.phases(id)).not.toContain("RUNNING");
  });

  test("a stopped session whose worker left cleanly ends its allocation CANCELLED, no exit code", async () => {
    const h = make();
    const id = h.addWorkload({ kind: "SESSION" });
    await h.tick();
    const handle = only(h, id).handle!;
    h.sim.start(handle);
    await h.tick();
    h.sim.setCancelLagSteps(100);
    h.stop(id);
    await h.tick();
    // The worker was told to stop and exits 0 before the backend's cancel lands.
    h.sim.finish(handle, { phase: "COMPLETED", exitCode: 0 });
    for (let i = 0; i < 5 && h.workload(id).phase !== "CANCELLED"; i++) await h.tick();
    expect(h.workload(id)).toMatchObject({
      phase: "CANCELLED",
      reason: "USER_CANCELLED",
      exitCode: null,
    });
    expect(only(h, id)).toMatchObject({
      phase: "CANCELLED",
      reason: "USER_CANCELLED",
      exitCode: null,
    });
  });

  test("a batch job that completed on its own before the cancel landed keeps its truth", async () => {
    const h = make();
    const id = h.addWorkload();
    await h.tick();
    const handle = only(h, id).handle!;
    h.sim.start(handle);
    await h.tick();
    h.sim.setCancelLagSteps(100);
    h.stop(id);
    await h.tick();
    h.sim.finish(handle, { phase: "COMPLETED", exitCode: 0 });
    for (let i = 0; i < 5 && h.workload(id).phase !== "CANCELLED"; i++) await h.tick();
    expect(h.workload(id)).toMatchObject({ phase: "CANCELLED", exitCode: 0 });
    expect(only(h, id)).toMatchObject({ phase: "COMPLETED", exitCode: 0 });
  });

  test("a cancel by the backend during a stop carries the stop's reason, and no exit code", async () => {
    const h = make();
    const id = h.addWorkload();
    await h.tick();
    const handle = only(h, id).handle!;
    h.sim.start(handle);
    await h.tick();
    h.stop(id, "IDLE_TIMEOUT", "idle");
    for (let i = 0; i < 6 && h.workload(id).phase !== "CANCELLED"; i++) await h.tick();
    expect(h.workload(id)).toMatchObject({
      phase: "CANCELLED",
      reason: "IDLE_TIMEOUT",
      exitCode: null,
    });
    expect(only(h, id)).toMatchObject({ phase: "CANCELLED", reason: "IDLE_TIMEOUT" });
  });
});
