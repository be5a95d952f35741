/**
 * A live view that was rebuilt (a first load, or one whose position in the change log was
 * lost) cannot say what changed, so the tick after it looks at every live workload: a tick
 * that narrowed to "what changed" would skip a write that landed before the rebuild.
 */
import { describe, expect, test } from "bun:test";
import type { ReconcilerStore } from "../../src/core/reconciler/create-reconciler.ts";
import { harnessPerTest } from "../support/reconciler-harness.ts";

const make = harnessPerTest();

describe("a rebuilt live view", () => {
  test("forces a full tick: every live allocation is observed", async () => {
    let rebuildNext = false;
    const rebuilding = (inner: ReconcilerStore): ReconcilerStore => ({
      ...inner,
      loadView: () => inner.loadView(),
      decodeSpecs: (w) => inner.decodeSpecs(w),
      findAllocationsByTokens: (t) => inner.findAllocationsByTokens(t),
      mintAttempts: (i) => inner.mintAttempts(i),
      applyTransitions: (ts) => inner.applyTransitions(ts),
      markAcknowledged: (a) => inner.markAcknowledged(a),
      loadViewChanges: () => {
        const changes = inner.loadViewChanges?.();
        if (changes === undefined) throw new Error("the store keeps no live view");
        if (!rebuildNext) return changes;
        rebuildNext = false;
        return { items: changes.items, changed: [], rebuilt: true };
      },
    });
    const h = make({ sim: { reportsChanges: true }, wrapStore: rebuilding });
    const ids = [h.addWorkload(), h.addWorkload(), h.addWorkload()];
    await h.tick();
    for (const id of ids) {
      const handle = h.allocations(id)[0]?.handle;
      if (!handle) throw new Error(`${id} was not submitted`);
      h.sim.start(handle);
    }
    for (let i = 0; i < 3; i++) await h.tick();
    const observedTargets = () =>
      h.sim.log.flatMap((c) => (c.op === "observe" ? c.targets.map((t) => t.allocationId) : []));

    // Steady: running, watched, nothing changed: a focused tick observes none of them.
    h.sim.resetCalls();
    const before = observedTargets().length;
    await h.tick();
    expect(observedTargets().length).toBe(before);

    rebuildNext = true;
    await h.tick();
    const after = observedTargets().slice(before);
    const current = ids.map((id) => h.allocations(id)[0]?.id ?? "");
    expect([...new Set(after)].sort()).toEqual([...current].sort());
  });
});
