/**
 * A workload admitted with its first attempt minted in the same transaction (what POST does)
 * goes to the backend at once, without a tick and without a token lookup; every other way it
 * can go (no free lane, a backend not answering, a stop, a crash between the commit and the
 * hand-over or after the submission) ends with exactly one job, found by token after a
 * restart (INV-8).
 */
import { describe, expect, test } from "bun:test";
import {
  harnessPerTest,
  recordSubmits as recording,
  settleLanes as settle,
} from "../support/reconciler-harness.ts";

const make = harnessPerTest();

describe("admitted: the first attempt goes out at once", () => {
  test("one submit, fresh (no lookup), with no tick at all", async () => {
    const h = make();
    const seen = recording(h);
    const { id, attempt } = h.admit();
    expect(h.reconciler.commandsInFlight()).toBe(1);
    await h.reconciler.idle();
    expect(h.reconciler.lastTick()).toBeNull();
    expect(seen.map((r) => [r.token, r.freshToken])).toEqual([[attempt.token, true]]);
    expect(h.sim.calls.findByToken).toBe(0);
    expect(h.sim.jobs()).toHaveLength(1);
    expect(h.workload(id).phase).toBe("QUEUED");
    expect(h.phases(id)).toEqual(["PENDING", "SUBMITTING", "QUEUED"]);
    // The next tick follows it like any other: nothing submitted or looked up again.
    await h.tick();
    expect(seen).toHaveLength(1);
    expect(h.sim.calls.findByToken).toBe(0);
    expect(h.sim.freshTokenViolations).toEqual([]);
  });

  test("without a free submit lane it waits; the next pass submits it, still without a lookup", async () => {
    const h = make({ maxCommandsInFlight: 2 });
    const seen = recording(h);
    h.sim.holdNextSubmit();
    h.addWorkload();
    await h.tickNoWait();
    expect(h.sim.heldSubmits).toBe(1);
    const { id, attempt } = h.admit();
    await settle();
    // The only submit lane is held: the admitted attempt is not handed over yet.
    expect(seen.map((r) => r.token)).not.toContain(attempt.token);
    expect(h.workload(id).phase).toBe("SUBMITTING");
    h.sim.settleHeld("land");
    await h.reconciler.idle();
    await h.tick();
    const mine = seen.filter((r) => r.token === attempt.token);
    expect(mine.map((r) => r.freshToken)).toEqual([true]);
    expect(h.sim.calls.findByToken).toBe(0);
    expect(h.workload(id).phase).toBe("QUEUED");
    expect(h.sim.jobs()).toHaveLength(2);
  });

  test("a tick that finds a waiting admitted attempt beside a workload with no attempt yet", async () => {
    // Guards keepFresh's null check: reading the attempt of a workload not minted yet threw,
    // and the whole tick (every other workload's progress) failed with it.
    const h = make({ maxCommandsInFlight: 2 });
    h.sim.holdNextSubmit();
    h.addWorkload();
    await h.tickNoWait();
    const { id } = h.admit();
    await settle();
    expect(h.workload(id).phase).toBe("SUBMITTING");
    const bare = h.addWorkload();
    const report = await h.tickNoWait();
    expect(report.error).toBeNull();
    h.sim.settleHeld("land");
    await h.reconciler.idle();
    await h.tick();
    expect(h.workload(id).phase).toBe("QUEUED");
    expect(h.workload(bare).phase).toBe("QUEUED");
    expect(h.sim.jobs()).toHaveLength(3);
  });

  test("while the backend is not answering it waits; once it answers, one fresh submit", async () => {
    const h = make();
    const seen = recording(h);
    const running = h.addWorkload();
    await h.tick();
    expect(h.workload(running).phase).toBe("QUEUED");
    h.sim.setAvailable(false);
    const report = await h.tick();
    expect(report.backendUnavailable).toBe(true);
    const { id, attempt } = h.admit();
    await settle();
    expect(seen.map((r) => r.token)).not.toContain(attempt.token);
    // Still not while the ticks hear nothing back.
    await h.tick();
    expect(seen.map((r) => r.token)).not.toContain(attempt.token);
    h.sim.setAvailable(true);
    await h.tick();
    await h.tick();
    expect(seen.filter((r) => r.token === attempt.token).map((r) => r.freshToken)).toEqual([true]);
    expect(h.sim.calls.findByToken).toBe(0);
    expect(h.workload(id).phase).toBe("QUEUED");
  });

  test("stopped before it was handed over: cancelled without touching the backend", async () => {
    const h = make({ maxCommandsInFlight: 2 });
    const seen = recording(h);
    h.sim.holdNextSubmit();
    h.addWorkload();
    await h.tickNoWait();
    const { id, attempt } = h.admit();
    h.stop(id);
    h.sim.settleHeld("land");
    await h.reconciler.idle();
    await h.tick();
    await h.tick();
    expect(h.workload(id).phase).toBe("CANCELLED");
    expect(seen.map((r) => r.token)).not.toContain(attempt.token);
    expect(h.sim.jobs()).toHaveLength(1);
  });
});

describe("admitted: crash windows (INV-8)", () => {
  test("died between the commit and the hand-over: the next process looks the token up, then submits it", async () => {
    const h = make();
    const seen = recording(h);
    const { id, attempt } = h.admit({ handOver: false });
    h.restart();
    await h.tick();
    await h.tick();
    expect(h.sim.calls.findByToken).toBeGreaterThan(0);
    const mine = seen.filter((r) => r.token === attempt.token);
    expect(mine).toHaveLength(1);
    expect(mine[0]?.freshToken).toBeUndefined();
    expect(h.sim.jobs()).toHaveLength(1);
    expect(h.workload(id).phase).toBe("QUEUED");
  });

  test("died with the submission in flight: found by token after a restart, never a second job", async () => {
    for (const how of ["land", "drop"] as const) {
      // Each build gets its own generation; a crashed (replaced) process writes nothing more.
      let generation = 0;
      const h = make({
        // The port's contract is honoured either way; without the backend's own lookup
        // only the reconciler's (by token, after the restart) stands between us and two jobs.
        sim: { lookupBeforeSubmit: false },
        wrapStore: (inner) => {
          const mine = ++generation;
          return {
            ...inner,
            applyTransitions: (ts) => {
              if (mine !== generation) throw new Error("the crashed process is gone");
              return inner.applyTransitions(ts);
            },
          };
        },
      });
      const seen = recording(h);
      h.sim.holdNextSubmit();
      const { id, attempt } = h.admit();
      await settle();
      expect(h.sim.heldSubmits).toBe(1);
      h.restart();
      // The dead process's submission lands, or dies with it; its answer is never recorded.
      h.sim.settleHeld(how);
      await settle();
      expect(h.workload(id).phase).toBe("SUBMITTING");
      await h.tick();
      await h.tick();
      expect(h.sim.calls.findByToken).toBeGreaterThan(0);
      expect(seen.filter((r) => r.token === attempt.token).slice(1)).toEqual(
        how === "land" ? [] : [expect.objectContaining({ token: attempt.token })],
      );
      expect(h.sim.jobs()).toHaveLength(1);
      expect(h.workload(id).phase).toBe("QUEUED");
      expect(h.sim.freshTokenViolations).toEqual([]);
    }
  });
});
