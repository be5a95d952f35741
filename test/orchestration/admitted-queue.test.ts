/**
 * The admitted queue's hand-over: what the submission step leaves waiting (no free lane, a
 * backend not answering) must wake the loop, or those attempts sit SUBMITTING until some
 * unrelated tick comes by.
 */
import { describe, expect, test } from "bun:test";
import type { Allocation, Workload } from "../../src/core/models.ts";
import { createAdmittedQueue } from "../../src/core/reconciler/admitted.ts";
import type { Live } from "../../src/core/reconciler/submissions.ts";

// Only the fields the queue reads: the workload's desired state, the attempt's id, token,
// phase and handle.
function live(n: number): Live {
  const workload = { id: `w-${n}`, desired: { kind: "RUN" } } as unknown as Workload;
  const allocation = {
    id: `a-${n}`,
    token: `t-${n}`,
    phase: "SUBMITTING",
    handle: null,
  } as unknown as Allocation;
  return { workload, allocation };
}

function queueLeaving(left: number) {
  const wakes: string[] = [];
  const handed: string[][] = [];
  const queue = createAdmittedQueue({
    store: {
      findAllocationsByTokens: (tokens) =>
        tokens.map((t) => live(Number(String(t).slice(2)))) as never,
    },
    fresh: new Set(),
    submit: (group) => {
      handed.push(group.map((l) => l.allocation.id));
      return left;
    },
    wake: () => wakes.push("wake"),
  });
  return { queue, wakes, handed };
}

describe("admitted attempts go out in one group; what is left waiting wakes the loop", () => {
  test("all sent: no wake", async () => {
    const { queue, wakes, handed } = queueLeaving(0);
    for (const n of [1, 2]) queue.admitted(live(n).workload, live(n).allocation);
    await queue.drained();
    expect(handed).toEqual([["a-1", "a-2"]]);
    expect(wakes).toEqual([]);
  });

  test.each([1, 2])("%d left waiting: the loop is woken", async (left) => {
    const { queue, wakes, handed } = queueLeaving(left);
    for (const n of [1, 2]) queue.admitted(live(n).workload, live(n).allocation);
    await queue.drained();
    expect(handed).toEqual([["a-1", "a-2"]]);
    expect(wakes).toEqual(["wake"]);
  });
});
