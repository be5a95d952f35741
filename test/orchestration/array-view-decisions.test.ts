/**
 * A job array's elements reach the store through the reconciler's steps (issue 21): written
 * when they change (one more element completed, one failed, the array ended), and not at all
 * while they stay the same, so a steady tick of a long sweep writes nothing.
 */
import { describe, expect, test } from "bun:test";
import {
  arrayObservation,
  type TimedElementState,
} from "../../src/core/array/array-observation.ts";
import type { Phase } from "../../src/core/models.ts";
import type { Observed } from "../../src/core/reconciler/decisions.ts";
import { followObservation } from "../../src/core/reconciler/decisions.ts";
import { markStopped } from "../../src/core/reconciler/stop-decisions.ts";
import { harnessPerTest } from "../support/reconciler-harness.ts";

const make = harnessPerTest();

function observe(...phases: Phase[]): Observed {
  const elements = new Map<number, TimedElementState>();
  phases.forEach((phase, index) => {
    const failed = phase === "FAILED";
    elements.set(index, {
      phase,
      reason: failed ? "NONZERO_EXIT" : null,
      exitCode: failed ? 3 : phase === "COMPLETED" ? 0 : null,
      startedAt: phase === "QUEUED" ? null : 1,
      endedAt: failed || phase === "COMPLETED" ? 2 : null,
    });
  });
  const obs = arrayObservation(phases.length, elements);
  if (obs.kind !== "Observed") throw new Error("an array observation is always Observed");
  return obs;
}

describe("an array's elements in the reconciler's steps", () => {
  test("written when they change, never when they stay the same, and with the ending", () => {
    const h = make();
    const { id, attempt } = h.admit({ handOver: false });
    const running = { ...h.workload(id), phase: "RUNNING" as const, reason: "STARTED" as const };
    const first = observe("RUNNING", "RUNNING", "QUEUED");
    const a = { ...attempt, phase: "RUNNING" as const, reason: "STARTED" as const };

    const seen = followObservation(running, a, first, 5)?.allocation?.arrayViewJson;
    expect(seen).toBeDefined();
    expect(JSON.parse(seen ?? "null")).toMatchObject({
      size: 3,
      counts: { RUNNING: 2, QUEUED: 1 },
      indices: { RUNNING: "0-1", QUEUED: "2" },
    });
    // The same elements again: no step at all.
    const stored = { ...a, arrayViewJson: seen ?? null };
    expect(followObservation(running, stored, first, 6)).toBeNull();

    // One element completed: the array stays RUNNING, yet its elements and counts are news.
    const moved = followObservation(running, stored, observe("COMPLETED", "RUNNING", "RUNNING"), 7);
    expect(moved?.allocation?.phase).toBe("RUNNING");
    expect(JSON.parse(moved?.allocation?.arrayViewJson ?? "null").counts).toEqual({
      COMPLETED: 1,
      RUNNING: 2,
    });
    expect(moved?.workload?.message).toBe("3 elements: 1 completed, 2 running");

    // The ending carries the last elements: which one failed, with its exit code.
    const ended = followObservation(
      running,
      stored,
      observe("COMPLETED", "FAILED", "COMPLETED"),
      8,
    );
    expect(ended?.allocation?.phase).toBe("FAILED");
    expect(JSON.parse(ended?.allocation?.arrayViewJson ?? "null").elements).toEqual([
      { index: 1, phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 },
    ]);
  });

  test("a cancelled array keeps its last elements: which had completed before the stop", () => {
    const h = make();
    const { id, attempt } = h.admit({ handOver: false });
    const w = {
      ...h.workload(id),
      phase: "STOPPING" as const,
      reason: "USER_CANCELLED" as const,
    };
    const a = { ...attempt, phase: "STOPPING" as const, reason: "USER_CANCELLED" as const };
    const observation = observe("COMPLETED", "CANCELLED", "CANCELLED");
    if (observation.phase !== "CANCELLED") throw new Error("the array should end CANCELLED");
    const t = markStopped(
      w,
      a,
      { reason: "USER_CANCELLED", message: "" },
      { kind: "Ended", observation: { ...observation, phase: "CANCELLED" } },
      9,
    );
    expect(JSON.parse(t.allocation?.arrayViewJson ?? "null").indices).toEqual({
      COMPLETED: "0",
      CANCELLED: "1-2",
    });
  });
});
