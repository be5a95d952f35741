/**
 * Independent lanes: a submission whose answer does not come holds nothing else, and the
 * attempt it carries is left alone by later ticks until that answer is recorded. Plus the
 * lookup-skip rule (`freshToken`) through every crash window around a submission.
 */
import { describe, expect, test } from "bun:test";
import { bindReconcilerStore } from "../../src/adapters/store-sqlite/stores/reconciler-store.ts";
import { createReconciler } from "../../src/core/reconciler/create-reconciler.ts";
import { systemTimers } from "../../src/lib/clock.ts";
import {
  harnessPerTest,
  inertPreparer,
  recordSubmits as recording,
  settleLanes as settle,
} from "../support/reconciler-harness.ts";

const make = harnessPerTest();

describe("lanes", () => {
  test("a hung submission blocks neither observation nor a bystander's cancel", async () => {
    const h = make();
    const bystander = h.addWorkload();
    await h.tick();
    const job = h.allocations(bystander)[0]?.handle;
    if (!job) throw new Error("bystander not submitted");
    h.sim.start(job);
    await h.tick();
    expect(h.workload(bystander).phase).toBe("RUNNING");

    h.sim.holdNextSubmit();
    const stuck = h.addWorkload();
    await h.tickNoWait();
    expect(h.sim.heldSubmits).toBe(1);
    expect(h.reconciler.commandsInFlight()).toBe(1);

    h.stop(bystander);
    await h.tickNoWait();
    await settle();
    // The cancel went out while the submission still hangs.
    expect(h.sim.job(job)?.phase).toBe("CANCELLED");
    await h.tickNoWait();
    expect(h.workload(bystander).phase).toBe("CANCELLED");
    expect(h.sim.heldSubmits).toBe(1);
    expect(h.workload(stuck).phase).toBe("SUBMITTING");

    h.sim.settleHeld("land");
    await h.reconciler.idle();
    expect(h.workload(stuck).phase).toBe("QUEUED");
  });

  test("later ticks neither look up nor resubmit an attempt whose submission is in flight", async () => {
    const h = make({ sim: { lookupBeforeSubmit: false } });
    h.sim.holdNextSubmit();
    const id = h.addWorkload();
    await h.tickNoWait();
    for (let i = 0; i < 3; i++) await h.tickNoWait();
    expect(h.sim.calls.findByToken).toBe(0);
    expect(h.sim.calls.submit).toBe(1);
    h.sim.settleHeld("land");
    await h.reconciler.idle();
    await h.tick();
    expect(h.sim.jobs()).toHaveLength(1);
    expect(h.workload(id).phase).toBe("QUEUED");
  });

  test("submissions in flight are bounded, and a cancel always finds a lane", async () => {
    const h = make({ maxCommandsInFlight: 2 });
    const running = h.addWorkload();
    await h.tick();
    h.sim.holdNextSubmit();
    h.addWorkload();
    await h.tickNoWait();
    // Only one of two lanes may submit: the next workload waits, PENDING, minting nothing.
    const waiting = h.addWorkload();
    await h.tickNoWait();
    expect(h.sim.calls.submit).toBe(2);
    expect(h.workload(waiting).phase).toBe("PENDING");
    expect(h.allocations(waiting)).toHaveLength(0);

    h.stop(running);
    await h.tickNoWait();
    expect(h.sim.calls.cancel).toBe(1);

    h.sim.settleHeld("land");
    await h.reconciler.idle();
    await h.tick();
    expect(h.workload(waiting).phase).toBe("QUEUED");
  });

  test("a stop of an attempt whose submission is in flight waits for its answer, then cancels it", async () => {
    const h = make();
    h.sim.holdNextSubmit();
    const id = h.addWorkload();
    await h.tickNoWait();
    h.stop(id);
    await h.tickNoWait();
    expect(h.sim.calls.findByToken).toBe(0);
    h.sim.settleHeld("land");
    await h.reconciler.idle();
    for (let i = 0; i < 3; i++) await h.tick();
    expect(h.workload(id).phase).toBe("CANCELLED");
    expect(h.sim.jobs().map((j) => j.phase)).toEqual(["CANCELLED"]);
  });

  test("a crash with a submission in flight is resolved by token, never by a blind resubmit", async () => {
    for (const how of ["land", "drop"] as const) {
      // Each build gets its own generation; a crashed (replaced) process writes nothing more.
      let generation = 0;
      const h = make({
        sim: { lookupBeforeSubmit: false },
        wrapStore: (inner) => {
          const mine = ++generation;
          const alive = () => {
            if (mine !== generation) throw new Error("the crashed process is gone");
          };
          return {
            ...inner,
            mintAttempts: (inputs) => {
              alive();
              return inner.mintAttempts(inputs);
            },
            applyTransitions: (ts) => {
              alive();
              return inner.applyTransitions(ts);
            },
          };
        },
      });
      h.sim.holdNextSubmit();
      const id = h.addWorkload();
      await h.tickNoWait();
      h.restart();
      // The dead process's submission lands, or dies with it; its answer is never recorded.
      h.sim.settleHeld(how);
      await settle();
      expect(h.workload(id).phase).toBe("SUBMITTING");
      await h.tick();
      await h.tick();
      expect(h.sim.calls.findByToken).toBeGreaterThan(0);
      expect(h.sim.jobs()).toHaveLength(1);
      expect(h.workload(id).phase).toBe("QUEUED");
      expect(h.sim.freshTokenViolations).toEqual([]);
    }
  });
});

describe("freshToken: the lookup before submit is skipped only when provably useless", () => {
  test("a first submission of a token minted in this process is fresh", async () => {
    const h = make();
    const seen = recording(h);
    h.addWorkload();
    await h.tick();
    expect(seen.map((r) => r.freshToken)).toEqual([true]);
    expect(h.sim.freshTokenViolations).toEqual([]);
  });

  test("a resubmit after Unknown is not fresh, so the backend looks it up", async () => {
    const h = make();
    const seen = recording(h);
    h.sim.failNextSubmits("UNKNOWN_WITHOUT_CREATE");
    h.addWorkload();
    await h.tick();
    await h.tick();
    expect(seen.map((r) => r.freshToken ?? false)).toEqual([true, false]);
    expect(h.sim.jobs()).toHaveLength(1);
  });

  test("crash windows: after the mint and after the submit, the restarted process looks up first", async () => {
    for (const point of ["reconciler.after-mint", "reconciler.after-submit"] as const) {
      const h = make();
      const seen = recording(h);
      let armed = true;
      const crashing = createReconciler({
        timers: systemTimers,
        store: bindReconcilerStore(h.deps),
        backend: h.sim.backend,
        preparer: inertPreparer,
        clock: h.clock,
        log: h.log,
        faultPoint: (name) => {
          if (armed && name === point) {
            armed = false;
            throw new Error(`crash at ${name}`);
          }
        },
      });
      const id = h.addWorkload();
      await expect(crashing.reconcileOnce()).rejects.toThrow("crash");
      const before = seen.length;
      h.restart();
      await h.tick();
      await h.tick();
      // The restarted process did not mint this token: any submit of it is not fresh.
      expect(seen.slice(before).every((r) => r.freshToken === undefined)).toBe(true);
      expect(seen.length - before).toBe(point === "reconciler.after-mint" ? 1 : 0);
      expect(h.sim.calls.findByToken).toBeGreaterThan(0);
      expect(h.sim.jobs()).toHaveLength(1);
      expect(h.workload(id).phase).toBe("QUEUED");
      expect(h.sim.freshTokenViolations).toEqual([]);
    }
  });
});
