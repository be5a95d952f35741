import { afterEach, describe, expect, test } from "bun:test";
import type { AllocationBackend, TerminalFact } from "../../src/orchestration/ports.ts";
import {
  bindReconcilerStore,
  createReconciler,
  type Reconciler,
  type Timers,
} from "../../src/orchestration/reconciler.ts";
import { type Harness, harness, inertPreparer } from "./harness.ts";

/** Timers a test fires by hand: no real sleeping. */
function manualTimers() {
  const pending = new Map<number, () => void>();
  let next = 0;
  const timers: Timers = {
    set(callback) {
      next += 1;
      pending.set(next, callback);
      return next;
    },
    clear(handle) {
      pending.delete(handle as number);
    },
  };
  return {
    timers,
    get armed() {
      return pending.size;
    },
    fire() {
      const due = [...pending.values()];
      pending.clear();
      for (const cb of due) cb();
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
  const backend = {
    ...inner,
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

function setup() {
  const h = harness();
  harnesses.push(h);
  const clock = manualTimers();
  const gated = gatedBackend(h.sim.backend);
  const reconciler: Reconciler = createReconciler({
    store: bindReconcilerStore(h.deps),
    backend: gated.backend,
    preparer: inertPreparer,
    clock: h.clock,
    log: h.log,
    timers: clock.timers,
    tickIntervalMs: 60_000,
  });
  // Each tick sweeps once at its end; the first tick also sweeps at its start.
  const ticks = () => Math.max(0, gated.sweeps - 1);
  return { h, clock, gated, reconciler, ticks };
}

describe("run and wake", () => {
  test("ticks at start, on wake, and on the periodic timer; abort resolves run", async () => {
    const { h, clock, reconciler, ticks } = setup();
    const abort = new AbortController();
    const done = reconciler.run(abort.signal);
    await settle();
    expect(ticks()).toBe(1);
    expect(clock.armed).toBe(1);

    const id = h.addWorkload();
    reconciler.wake();
    await settle();
    expect(ticks()).toBe(2);
    expect(h.workload(id).phase).toBe("QUEUED");

    clock.fire();
    await settle();
    expect(ticks()).toBe(3);

    abort.abort();
    await done;
    expect(clock.armed).toBe(0);
    expect(reconciler.lastTick()?.workloadsConsidered).toBe(1);
  });

  test("wakes during a tick coalesce into one more tick right after it", async () => {
    const { gated, reconciler, ticks } = setup();
    const abort = new AbortController();
    const done = reconciler.run(abort.signal);
    await settle();
    expect(ticks()).toBe(1);
    gated.hold();
    reconciler.wake();
    await settle();
    expect(ticks()).toBe(2); // the woken tick is now held open
    reconciler.wake();
    reconciler.wake();
    reconciler.wake();
    gated.release();
    await settle();
    expect(ticks()).toBe(3);
    await settle();
    expect(ticks()).toBe(3);
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
