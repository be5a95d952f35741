/**
 * The dependency rule (core/dependencies.ts): a dependent runs only once every parent ended
 * the way it asked, never while one is live, and is ended (naming the parent) as soon as one
 * ended so that it never can.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  type Dependency,
  dependenciesOf,
  dependencyVerdict,
  type ParentState,
} from "../../src/core/dependencies.ts";
import { isTerminal, PHASES, type Phase } from "../../src/core/models.ts";

const parents = (entries: Record<string, Phase>): Map<string, ParentState> =>
  new Map(Object.entries(entries).map(([id, phase]) => [id, { phase, reason: null }]));

describe("dependencyVerdict", () => {
  test("afterok waits for a live parent, runs after COMPLETED, never after FAILED", () => {
    const after: Dependency[] = [{ kind: "afterok", workloadId: "p" }];
    expect(dependencyVerdict(after, parents({ p: "RUNNING" })).kind).toBe("Wait");
    expect(dependencyVerdict(after, parents({ p: "COMPLETED" })).kind).toBe("Ready");
    const never = dependencyVerdict(
      after,
      new Map([["p", { phase: "FAILED", reason: "NONZERO_EXIT" }]]),
    );
    expect(never).toEqual({
      kind: "Never",
      parentId: "p",
      message: "afterok:p can never be met: that workload ended FAILED (NONZERO_EXIT)",
    });
  });

  test("afterany runs after any end; a parent gone is never met", () => {
    const after: Dependency[] = [{ kind: "afterany", workloadId: "p" }];
    for (const phase of ["COMPLETED", "FAILED", "CANCELLED", "LOST"] as const) {
      expect(dependencyVerdict(after, parents({ p: phase })).kind).toBe("Ready");
    }
    expect(dependencyVerdict(after, new Map()).kind).toBe("Never");
  });

  test("property: Ready iff every parent ended as asked; Never iff one cannot be", () => {
    const phase = fc.constantFrom(...PHASES);
    fc.assert(
      fc.property(
        fc.array(fc.record({ ok: fc.boolean(), phase }), { minLength: 1, maxLength: 6 }),
        (rows) => {
          const after = rows.map(
            (r, i): Dependency => ({
              kind: r.ok ? "afterok" : "afterany",
              workloadId: `p${i}`,
            }),
          );
          const states = parents(Object.fromEntries(rows.map((r, i) => [`p${i}`, r.phase])));
          const verdict = dependencyVerdict(after, states);
          const broken = rows.findIndex(
            (r) => r.ok && isTerminal(r.phase) && r.phase !== "COMPLETED",
          );
          const allEnded = rows.every((r) => isTerminal(r.phase));
          if (broken >= 0) {
            expect(verdict.kind).toBe("Never");
          } else if (allEnded) {
            expect(verdict.kind).toBe("Ready");
          } else {
            expect(verdict.kind).toBe("Wait");
          }
        },
      ),
    );
  });
});

test("dependenciesOf keeps each parent once per kind, afterok first", () => {
  expect(dependenciesOf(["a", "a", "b"], ["a"])).toEqual([
    { kind: "afterok", workloadId: "a" },
    { kind: "afterok", workloadId: "b" },
    { kind: "afterany", workloadId: "a" },
  ]);
});
