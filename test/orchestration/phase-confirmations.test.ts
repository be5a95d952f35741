/**
 * `phaseConfirmedAt`: when the backend last confirmed an allocation's phase, as this process
 * heard it. A view reads it so a client can tell a fresh RUNNING from one nobody has seen
 * since a restart (issue 21: a purged job read RUNNING for 90 s before it became LOST).
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { AllocationObservation } from "../../src/core/ports/allocation-backend.ts";
import { createPhaseConfirmations } from "../../src/core/reconciler/confirmations.ts";
import { type Harness, harness } from "../support/reconciler-harness.ts";

let open: Harness[] = [];
afterEach(() => {
  for (const h of open) h.close();
  open = [];
});

const running: AllocationObservation = {
  kind: "Observed",
  phase: "RUNNING",
  reason: "STARTED",
  message: null,
  exitCode: null,
  startedAt: 1,
  endedAt: null,
};

describe("the reconciler's confirmations", () => {
  test.each([
    ["a backend that answers every observation", false],
    ["a backend that reports changes since a cursor", true],
  ])(
    "%s: set by each answer, kept when the backend is silent, gone after a restart",
    async (_what, reportsChanges) => {
      const h = harness({ sim: { reportsChanges } });
      open.push(h);
      const id = h.addWorkload();
      await h.tick();
      const a = h.allocations(id)[0];
      if (a === undefined || a.handle === null) throw new Error("submitted with a handle");
      h.sim.start(a.handle);
      h.clock.advance(1_000);
      await h.tick();
      expect(h.workload(id).phase).toBe("RUNNING");
      expect(h.reconciler.phaseConfirmedAt(a.id)).toBe(h.clock.now());
      // Steady: nothing changes, and the answer still confirms it (a feed says "no change").
      for (let i = 0; i < 3; i++) {
        h.clock.advance(5_000);
        await h.tick();
        expect(h.reconciler.phaseConfirmedAt(a.id)).toBe(h.clock.now());
      }
      // No answer: the phase stays RUNNING, and its confirmation grows old instead.
      const heard = h.clock.now();
      h.sim.setAvailable(false);
      h.clock.advance(5_000);
      const report = await h.tick();
      expect(report.backendUnavailable).toBe(true);
      expect(h.workload(id).phase).toBe("RUNNING");
      expect(h.reconciler.phaseConfirmedAt(a.id)).toBe(heard);
      // A restarted daemon has heard nothing yet.
      h.sim.setAvailable(true);
      const restarted = h.restart();
      expect(restarted.phaseConfirmedAt(a.id)).toBeNull();
    },
  );
});

describe("createPhaseConfirmations", () => {
  test("Indeterminate confirms nothing; an ended allocation is forgotten", () => {
    const c = createPhaseConfirmations();
    c.observed(new Map([["a", { kind: "Indeterminate", message: "lagging" }]]), 10);
    expect(c.confirmedAt("a")).toBeNull();
    c.observed(new Map([["a", running]]), 20);
    expect(c.confirmedAt("a")).toBe(20);
    c.observed(new Map([["a", { ...running, phase: "COMPLETED", endedAt: 2 }]]), 30);
    expect(c.confirmedAt("a")).toBeNull();
  });

  test("a feed from a cursor confirms what it covers since it started, nothing else", () => {
    const c = createPhaseConfirmations();
    const target = (allocationId: string) =>
      ({ allocationId, token: "t", handle: "h" }) as unknown as Parameters<
        typeof c.feedAnswered
      >[1][number];
    c.feedAnswered(false, [target("a")], 100);
    c.feedAnswered(true, [target("b")], 200);
    expect(c.confirmedAt("a")).toBe(200);
    expect(c.confirmedAt("b")).toBe(200);
    expect(c.confirmedAt("c")).toBeNull();
    // A feed started afresh covers only its new targets.
    c.feedAnswered(false, [target("b")], 300);
    expect(c.confirmedAt("a")).toBeNull();
    expect(c.confirmedAt("b")).toBe(300);
  });
});
