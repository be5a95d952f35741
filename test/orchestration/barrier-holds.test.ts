/**
 * The cancel barrier holds at a stage that did not complete: nothing is released (and no
 * later stage runs) for a workload whose fence was not written or whose tasks were not
 * confirmed cancelled. Releasing early would free the allocation while its session workers
 * still run, or while another writer has moved the workload on.
 */
import { describe, expect, test } from "bun:test";
import type { ReconcilerStore } from "../../src/core/reconciler/create-reconciler.ts";
import { harnessPerTest, settleLanes } from "../support/reconciler-harness.ts";

const make = harnessPerTest();

/** Hooks whose cancelTasks is `cancel`, recording every stage they see. */
function hooks(cancel: () => Promise<void>) {
  const seen: string[] = [];
  return {
    seen,
    barrierHooks: {
      cancelTasks: async () => {
        seen.push("cancelTasks");
        await cancel();
      },
      drained: async () => {
        seen.push("drained");
        return true;
      },
    },
  };
}

describe("the cancel barrier holds", () => {
  test("while cancelTasks fails: not drained, not released, until it succeeds", async () => {
    let failing = true;
    const { seen, barrierHooks } = hooks(async () => {
      if (failing) throw new Error("gateway down");
    });
    const h = make({ barrierHooks });
    const id = h.addWorkload();
    await h.tick();
    h.stop(id);
    h.sim.resetCalls();
    await h.tick();
    await h.tick();
    expect(seen).toEqual(["cancelTasks", "cancelTasks"]);
    expect(h.sim.calls.cancel).toBe(0);
    expect(h.workload(id).phase).toBe("STOPPING");
    failing = false;
    await h.tick();
    expect(seen.slice(2)).toEqual(["cancelTasks", "drained"]);
    expect(h.sim.calls.cancel).toBe(1);
  });

  test("while the drain check throws: not released, until it answers", async () => {
    // Guards the drain stage's catch: counted as drained, a check that cannot tell would
    // free the allocation while the session's workers may still be writing.
    let throwing = true;
    const seen: string[] = [];
    const h = make({
      barrierHooks: {
        cancelTasks: async () => {},
        drained: async () => {
          seen.push("drained");
          if (throwing) throw new Error("gateway down");
          return true;
        },
      },
    });
    const id = h.addWorkload();
    await h.tick();
    h.stop(id);
    h.sim.resetCalls();
    await h.tick();
    await h.tick();
    expect(seen).toEqual(["drained", "drained"]);
    expect(h.sim.calls.cancel).toBe(0);
    expect(h.workload(id).phase).toBe("STOPPING");
    throwing = false;
    await h.tick();
    expect(h.sim.calls.cancel).toBe(1);
  });

  test("while cancelTasks hangs: the tick waits for it before draining or releasing", async () => {
    let finish = () => {};
    const { seen, barrierHooks } = hooks(
      () =>
        new Promise<void>((resolve) => {
          finish = resolve;
        }),
    );
    const h = make({ barrierHooks });
    const id = h.addWorkload();
    await h.tick();
    h.stop(id);
    h.sim.resetCalls();
    const tick = h.tick();
    await settleLanes();
    expect(seen).toEqual(["cancelTasks"]);
    expect(h.sim.calls.cancel).toBe(0);
    finish();
    await tick;
    expect(seen).toEqual(["cancelTasks", "drained"]);
    expect(h.sim.calls.cancel).toBe(1);
  });

  test("when the fence write does not apply: no later stage runs for that workload", async () => {
    let refuseFences = false;
    const refusingFences = (inner: ReconcilerStore): ReconcilerStore => ({
      ...inner,
      loadView: () => inner.loadView(),
      decodeSpecs: (w) => inner.decodeSpecs(w),
      findAllocationsByTokens: (t) => inner.findAllocationsByTokens(t),
      mintAttempts: (i) => inner.mintAttempts(i),
      markAcknowledged: (a) => inner.markAcknowledged(a),
      // The compare-and-set misses (another writer moved the workload): false, not a throw.
      applyTransitions: (ts) => {
        if (!refuseFences) return inner.applyTransitions(ts);
        const fencing = ts.map((t) => t.allocation?.phase === "STOPPING");
        const rest = inner.applyTransitions(ts.filter((_, i) => !fencing[i]));
        let k = 0;
        return fencing.map((f) => (f ? false : (rest[k++] ?? false)));
      },
    });
    const { seen, barrierHooks } = hooks(async () => {});
    const h = make({ barrierHooks, wrapStore: refusingFences });
    const id = h.addWorkload();
    await h.tick();
    h.stop(id);
    h.sim.resetCalls();
    refuseFences = true;
    await h.tick();
    expect(seen).toEqual([]);
    expect(h.sim.calls.cancel).toBe(0);
    refuseFences = false;
    await h.tick();
    expect(seen).toEqual(["cancelTasks", "drained"]);
    expect(h.sim.calls.cancel).toBe(1);
  });
});
