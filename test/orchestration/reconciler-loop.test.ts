import { afterEach, describe, expect, test } from "bun:test";
import { createWorkload, listEvents } from "../../src/adapters/store-sqlite/index.ts";
import { bindReconcilerStore } from "../../src/adapters/store-sqlite/stores/reconciler-store.ts";
import type { AttemptPreparer } from "../../src/core/attempt-preparer.ts";
import type { AllocationBackend, TerminalFact } from "../../src/core/ports/allocation-backend.ts";
import {
  createReconciler,
  type Reconciler,
  type Timers,
} from "../../src/core/reconciler/create-reconciler.ts";
import {
  type Harness,
  type HarnessOptions,
  harness,
  inertPreparer,
  inertPreparerWithLimit,
} from "../support/reconciler-harness.ts";

/**
 * Timers a test fires by hand, and the monotonic clock they run on: firing moves the clock
 * to the timer's due time. No real sleeping.
 */
function manualTimers() {
  const pending = new Map<number, { callback: () => void; dueMs: number }>();
  let next = 0;
  let nowMs = 0;
  const timers: Timers = {
    after(delayMs, callback) {
      next += 1;
      const id = next;
      pending.set(id, { callback, dueMs: nowMs + delayMs });
      return () => {
        pending.delete(id);
      };
    },
  };
  return {
    timers,
    monotonicMs: () => nowMs,
    get armed() {
      return pending.size;
    },
    /** Delays of the timers armed now, from the current time. */
    get delays() {
      return [...pending.values()].map((p) => p.dueMs - nowMs);
    },
    advance(ms: number) {
      nowMs += ms;
    },
    fire() {
      const due = [...pending.values()];
      pending.clear();
      for (const p of due) nowMs = Math.max(nowMs, p.dueMs);
      for (const p of due) p.callback();
    },
  };
}

/** Lets queued promise continuations and immediates run. */
async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}

/**
 * A backend whose every tick passes through pendingTerminalFacts (the end-of-tick sweep),
 * which the test can hold open to keep a tick "in progress".
 */
function gatedBackend(inner: AllocationBackend) {
  let entered = 0;
  let active = 0;
  let maxActive = 0;
  let gate: Promise<void> | null = null;
  let open: () => void = () => {};
  const backend: AllocationBackend = {
    ...inner,
    capabilities: {
      ...inner.capabilities,
      terminalFacts: {
        async pendingTerminalFacts(): Promise<readonly TerminalFact[]> {
          entered += 1;
          active += 1;
          maxActive = Math.max(maxActive, active);
          try {
            if (gate) await gate;
            return [];
          } finally {
            active -= 1;
          }
        },
        async acknowledgeTerminal() {},
      },
    },
  };
  return {
    backend,
    get sweeps() {
      return entered;
    },
    get maxConcurrent() {
      return maxActive;
    },
    hold() {
      gate = new Promise<void>((r) => {
        open = r;
      });
    },
    release() {
      gate = null;
      open();
    },
  };
}

let harnesses: Harness[] = [];
afterEach(() => {
  for (const h of harnesses) h.close();
  harnesses = [];
});

function setup(preparer: AttemptPreparer = inertPreparer, sim: HarnessOptions["sim"] = {}) {
  const h = harness({ preparer, sim });
  harnesses.push(h);
  const clock = manualTimers();
  const gated = gatedBackend(h.sim.backend);
  const reconciler: Reconciler = createReconciler({
    store: bindReconcilerStore(h.deps),
    backend: gated.backend,
    preparer,
    clock: h.clock,
    log: h.log,
    timers: clock.timers,
    monotonicMs: clock.monotonicMs,
    minIntervalMs: 1000,
    maxIntervalMs: 60_000,
  });
  // Each tick sweeps once at its end; the first tick also sweeps at its start.
  const ticks = () => Math.max(0, gated.sweeps - 1);
  return { h, clock, gated, reconciler, ticks };
}

describe("run and wake", () => {
  test("ticks at start, on wake (no sooner than the minimum interval), and on the timer", async () => {
    const { h, clock, reconciler, ticks } = setup();
    const abort = new AbortController();
    const done = reconciler.run(abort.signal);
    await settle();
    expect(ticks()).toBe(1);
    expect(clock.armed).toBe(1);

    // A wake 1.5 s after the last tick: due at once.
    clock.advance(1500);
    const id = h.addWorkload();
    reconciler.wake();
    await settle();
    expect(ticks()).toBe(2);
    expect(h.workload(id).phase).toBe("QUEUED");

    // The timers from here on: a submission pass the settled lane asked for (a lane that
    // settles may free room for waiting work), then the next tick.
    for (let fired = 0; fired < 3 && ticks() < 3; fired++) {
      clock.fire();
      await settle();
    }
    expect(ticks()).toBe(3);

    abort.abort();
    await done;
    expect(clock.armed).toBe(0);
    expect(reconciler.lastTick()?.workloadsConsidered).toBe(1);
  });

  test("wakes coalesce: at most one tick per minimum interval, whatever the number of wakes", async () => {
    const { h, clock, reconciler, ticks } = setup();
    const abort = new AbortController();
    const done = reconciler.run(abort.signal);
    await settle();
    expect(ticks()).toBe(1);
    for (let i = 0; i < 100; i++) {
      reconciler.wake();
      clock.advance(5);
      await settle(2);
    }
    // 500 ms of wakes: still inside the first tick's minimum interval (submission passes
    // ran, but they observe nothing).
    expect(ticks()).toBe(1);
    expect(h.sim.calls.observe).toBe(0);
    while (ticks() < 2) {
      clock.fire();
      await settle();
    }
    expect(clock.monotonicMs()).toBe(1000);
    abort.abort();
    await done;
  });

  test("a wake inside the minimum interval submits new work at once, with no listing call", async () => {
    const { h, clock, reconciler, ticks } = setup();
    const abort = new AbortController();
    const done = reconciler.run(abort.signal);
    await settle();
    clock.advance(100);
    const id = h.addWorkload();
    reconciler.wake();
    await settle();
    expect(h.workload(id).phase).toBe("QUEUED");
    expect(ticks()).toBe(1);
    expect(h.sim.calls.observe).toBe(0);
    expect(h.sim.calls.findByToken).toBe(0);
    abort.abort();
    await done;
  });

  test("an admitted submission goes out at once; its job is observed within the minimum interval, not in the same instant", async () => {
    const { h, clock, reconciler, ticks } = setup();
    const abort = new AbortController();
    const done = reconciler.run(abort.signal);
    await settle();
    const running = h.addWorkload();
    reconciler.wake();
    clock.advance(1000);
    await settle();
    while (ticks() < 2) {
      clock.fire();
      await settle();
    }
    expect(h.workload(running).phase).toBe("QUEUED");
    // Backed off: nothing changes for a while.
    for (let i = 0; i < 4; i++) {
      clock.fire();
      await settle();
    }
    const backedOff = Math.max(...clock.delays);
    expect(backedOff).toBeGreaterThan(3000);
    // Well past the minimum interval since the last tick, still inside the backed-off one.
    clock.advance(2000);
    const observed = h.sim.calls.observe;
    const before = ticks();
    const created = createWorkload(h.deps, {
      id: "admitted",
      kind: "BATCH",
      name: "admitted",
      profile: "default",
      spec: { command: ["true"] },
      maxAttempts: 1,
      idempotencyKey: null,
      requestHash: null,
      firstAttempt: { ...reconciler.newAttemptIds(), message: "attempt 1 of 1" },
    });
    if (created.kind !== "Created" || created.attempt === null) throw new Error(created.kind);
    reconciler.admitted(created.workload, created.attempt);
    await settle();
    expect(h.workload("admitted").phase).toBe("QUEUED");
    // Submitted and recorded with no tick and no observation...
    expect([ticks(), h.sim.calls.observe]).toEqual([before, observed]);
    // ...and the next look is due within the minimum interval, no longer the backed-off one.
    expect(Math.min(...clock.delays)).toBeLessThanOrEqual(1000);
    while (ticks() === before) {
      clock.fire();
      await settle();
    }
    expect(h.sim.calls.observe).toBe(observed + 1);
    abort.abort();
    await done;
  });

  test("closed before an admitted attempt's turn: nothing is sent, the attempt stays for the next start", async () => {
    const { reconciler } = setup();
    const h = harnesses.at(-1) as Harness;
    const created = createWorkload(h.deps, {
      id: "admitted-late",
      kind: "BATCH",
      name: "admitted-late",
      profile: "default",
      spec: { command: ["true"] },
      maxAttempts: 1,
      idempotencyKey: null,
      requestHash: null,
      firstAttempt: { ...reconciler.newAttemptIds(), message: "attempt 1 of 1" },
    });
    if (created.kind !== "Created" || created.attempt === null) throw new Error(created.kind);
    const submitsBefore = h.sim.calls.submit;
    reconciler.admitted(created.workload, created.attempt);
    // The daemon's stop: the reconciler is closed, then the store; the turn comes after.
    reconciler.close();
    await settle();
    expect(h.sim.calls.submit).toBe(submitsBefore);
    expect(h.allocations("admitted-late").map((a) => [a.phase, a.handle])).toEqual([
      ["SUBMITTING", null],
    ]);
    reconciler.admitted(created.workload, created.attempt);
    h.close();
    harnesses.splice(harnesses.indexOf(h), 1);
    // A turn after the store closed would have thrown "Cannot use a closed database".
    await settle();
  });

  test("wakes during a tick coalesce into one more tick after the minimum interval", async () => {
    const { clock, gated, reconciler, ticks } = setup();
    const abort = new AbortController();
    const done = reconciler.run(abort.signal);
    await settle();
    expect(ticks()).toBe(1);
    gated.hold();
    clock.advance(1000);
    reconciler.wake();
    await settle();
    expect(ticks()).toBe(2); // the woken tick is now held open
    reconciler.wake();
    reconciler.wake();
    reconciler.wake();
    gated.release();
    await settle();
    expect(ticks()).toBe(2);
    while (ticks() < 3) {
      clock.fire();
      await settle();
    }
    // One tick for the three wakes, a minimum interval after the held one started.
    expect(clock.monotonicMs()).toBe(2000);
    await settle();
    expect(ticks()).toBe(3);
    abort.abort();
    await done;
  });

  test("while nothing changes the period doubles up to the maximum; a wake brings it back", async () => {
    const { clock, reconciler, ticks } = setup();
    const abort = new AbortController();
    const done = reconciler.run(abort.signal);
    await settle();
    const periods: number[] = [];
    for (let i = 0; i < 8; i++) {
      periods.push(...clock.delays);
      clock.fire();
      await settle();
    }
    expect(periods).toEqual([2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]);
    expect(ticks()).toBe(9);
    // A wake: the next tick comes within the minimum interval, and the period is the
    // minimum again.
    reconciler.wake();
    await settle();
    expect(ticks()).toBe(9);
    expect(clock.delays).toEqual([1000]);
    clock.fire();
    await settle();
    expect(ticks()).toBe(10);
    expect(clock.delays).toEqual([1000]);
    abort.abort();
    await done;
  });

  test("abort during a tick: run resolves only after that tick has finished", async () => {
    const { gated, reconciler } = setup();
    const abort = new AbortController();
    gated.hold();
    let resolved = false;
    const done = reconciler.run(abort.signal).then(() => {
      resolved = true;
    });
    await settle();
    abort.abort();
    await settle();
    expect(resolved).toBe(false);
    expect(reconciler.lastTick()).toBeNull();
    gated.release();
    await done;
    expect(reconciler.lastTick()).not.toBeNull();
  });

  test("reconcileOnce during run never overlaps a tick", async () => {
    const { gated, reconciler, ticks } = setup();
    const abort = new AbortController();
    gated.hold();
    const done = reconciler.run(abort.signal);
    await settle();
    const extra = reconciler.reconcileOnce();
    await settle();
    expect(gated.maxConcurrent).toBe(1);
    gated.release();
    await extra;
    expect(gated.maxConcurrent).toBe(1);
    expect(ticks()).toBe(2);
    abort.abort();
    await done;
  });

  test("a tick that fails is logged and the loop goes on", async () => {
    const h = harness();
    harnesses.push(h);
    const clock = manualTimers();
    let fail = true;
    const store = bindReconcilerStore(h.deps);
    const reconciler = createReconciler({
      store: {
        ...store,
        loadView: () => {
          if (fail) throw new Error("database is locked");
          return store.loadView();
        },
        loadViewChanges: () => {
          if (fail) throw new Error("database is locked");
          return store.loadViewChanges?.() ?? { items: new Map(), changed: [], rebuilt: true };
        },
      },
      backend: h.sim.backend,
      preparer: inertPreparer,
      clock: h.clock,
      log: h.log,
      timers: clock.timers,
    });
    const abort = new AbortController();
    const done = reconciler.run(abort.signal);
    await settle();
    expect(reconciler.lastTick()?.error).toContain("database is locked");
    expect(h.log.lines.some((l) => l.includes("reconciler tick failed"))).toBe(true);
    fail = false;
    const id = h.addWorkload();
    clock.fire();
    await settle();
    expect(reconciler.lastTick()?.error).toBeNull();
    expect(h.workload(id).phase).toBe("QUEUED");
    abort.abort();
    await done;
  });

  test("run cannot be started twice", async () => {
    const { reconciler } = setup();
    const abort = new AbortController();
    const done = reconciler.run(abort.signal);
    await expect(reconciler.run(abort.signal)).rejects.toThrow("already running");
    abort.abort();
    await done;
  });
});

describe("runway: the loop wakes for a TIME_LIMIT_NEAR", () => {
  /** A running workload with its end time stored; returns when its warning falls due. */
  async function runningWithDeadline(env: ReturnType<typeof setup>) {
    const { h, reconciler } = env;
    const id = h.addWorkload();
    await reconciler.reconcileOnce();
    const handle = h.allocations(id)[0]?.handle;
    if (handle === null || handle === undefined) throw new Error("not submitted");
    h.sim.start(handle);
    await reconciler.reconcileOnce();
    const deadlineAt = h.allocations(id)[0]?.deadlineAt;
    if (deadlineAt === null || deadlineAt === undefined) throw new Error("no deadline stored");
    // The default lead (5 min), less than half the hour.
    return { id, dueAt: deadlineAt - 300_000 };
  }
  const warnings = (env: ReturnType<typeof setup>, id: string) =>
    listEvents(env.h.deps, id).filter((e) => e.reason === "TIME_LIMIT_NEAR");

  /** Fires the one armed timer, moving the wall clock along with the monotonic one. */
  async function fireBoth(env: ReturnType<typeof setup>): Promise<number> {
    const [delay, ...more] = env.clock.delays;
    expect(more).toHaveLength(0);
    if (delay === undefined) throw new Error("no timer armed");
    env.h.clock.advance(delay);
    env.clock.fire();
    await settle();
    return delay;
  }

  test("a backed-off loop writes the warning at its due time, and paces as before otherwise", async () => {
    const env = setup(inertPreparerWithLimit(3_600));
    const { id, dueAt } = await runningWithDeadline(env);
    // The loop starts 45 s before the warning is due (its first tick records what the start
    // saw, so the period starts at the minimum) and backs off while nothing changes: ticks at
    // 0, 1, 3, 7, 15, 31 s; the next by the period would be at 63 s, 18 s late.
    env.h.clock.set(dueAt - 45_000);
    const abort = new AbortController();
    const done = env.reconciler.run(abort.signal);
    await settle();
    const periods: number[] = [];
    while (warnings(env, id).length === 0 && periods.length < 10) periods.push(await fireBoth(env));
    expect(periods).toEqual([1000, 2000, 4000, 8000, 16_000, 14_000]);
    expect(warnings(env, id)).toEqual([expect.objectContaining({ at: dueAt })]);
    // Written: back to the minimum, then the usual doubling, with no early wake left.
    const after: number[] = [];
    for (let i = 0; i < 4; i++) after.push(await fireBoth(env));
    expect(after).toEqual([1000, 2000, 4000, 8000]);
    expect(warnings(env, id)).toHaveLength(1);
    abort.abort();
    await done;
  });

  test("a warning due sooner than the minimum interval waits for it: the polling ceiling holds", async () => {
    const env = setup(inertPreparerWithLimit(3_600));
    const { id, dueAt } = await runningWithDeadline(env);
    // Ticks at 0, 1 and 3 s; the third 300 ms before the warning is due, with a period of 4 s.
    env.h.clock.set(dueAt - 3_300);
    const abort = new AbortController();
    const done = env.reconciler.run(abort.signal);
    await settle();
    expect([await fireBoth(env), await fireBoth(env)]).toEqual([1000, 2000]);
    const observes = env.h.sim.calls.observe;
    expect(warnings(env, id)).toHaveLength(0);
    expect(await fireBoth(env)).toBe(1000);
    expect(env.h.sim.calls.observe).toBe(observes + 1);
    expect(warnings(env, id)).toEqual([expect.objectContaining({ at: dueAt + 700 })]);
    abort.abort();
    await done;
  });

  test("a workload that ended before its warning no longer wakes the loop (focused ticks)", async () => {
    // A backend that reports changes, so the ticks after the first are focused ones, which
    // never see the ended workload again: the schedule must drop it all the same.
    const env = setup(inertPreparerWithLimit(3_600), { reportsChanges: true });
    const { id, dueAt } = await runningWithDeadline(env);
    env.h.clock.set(dueAt - 45_000);
    const abort = new AbortController();
    const done = env.reconciler.run(abort.signal);
    await settle();
    const handle = env.h.allocations(id)[0]?.handle;
    if (handle === null || handle === undefined) throw new Error("no handle");
    env.h.sim.finish(handle, { phase: "COMPLETED", exitCode: 0 });
    const periods: number[] = [];
    for (let i = 0; i < 7; i++) periods.push(await fireBoth(env));
    // Seen ended (a write: the minimum again), then the usual doubling straight past the
    // time its warning would have been due (45 s after the start), which wakes nobody.
    expect(periods).toEqual([1000, 1000, 2000, 4000, 8000, 16_000, 32_000]);
    expect(env.h.workload(id).phase).toBe("COMPLETED");
    expect(warnings(env, id)).toHaveLength(0);
    abort.abort();
    await done;
  });
});
