/**
 * The runway schedule keeps its earliest due time instead of scanning every entry on each
 * ask (runway.ts). Over generated histories of notes and forgets it must answer `dueNow` and
 * `nextAfter` exactly as a plain scan of the same entries does: a kept minimum that went
 * stale would write a warning late (nextAfter too far ahead) or never (dueNow empty).
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import type { Allocation, Workload } from "../../src/core/models.ts";
import type { ReconcileItem } from "../../src/core/ports/reconciler-store.ts";
import { createRunwaySchedule, warningDueAt } from "../../src/core/reconciler/runway.ts";

const IDS = ["w0", "w1", "w2", "w3", "w4", "w5"] as const;
const LEAD_MS = 10;

type Op =
  | {
      readonly kind: "note";
      readonly items: readonly { readonly id: number; readonly deadline: number | null }[];
      readonly everyLive: boolean;
    }
  | { readonly kind: "forget"; readonly ids: readonly number[] }
  /** The clock moves on by `afterMs` (never back), then both are asked. */
  | { readonly kind: "ask"; readonly afterMs: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant("note" as const),
    items: fc.array(
      fc.record({
        id: fc.nat(IDS.length - 1),
        // null: no known end (or already warned): the entry leaves.
        deadline: fc.option(fc.integer({ min: 20, max: 300 }), { nil: null }),
      }),
      { maxLength: 5 },
    ),
    everyLive: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant("forget" as const),
    ids: fc.array(fc.nat(IDS.length - 1), { maxLength: 3 }),
  }),
  fc.record({ kind: fc.constant("ask" as const), afterMs: fc.integer({ min: 0, max: 30 }) }),
);

function item(id: string, deadlineAt: number | null): ReconcileItem {
  const current = {
    id: `a-${id}`,
    phase: "RUNNING",
    deadlineAt,
    deadlineWarnedAt: null,
    startedAt: null,
  } as unknown as Allocation;
  return { workload: { id, profile: "p" } as unknown as Workload, current };
}

/** The schedule as a plain map, scanned on every ask: what the kept minimum must agree with. */
function model() {
  const due = new Map<string, { dueAt: number; deadlineAt: number }>();
  return {
    note(items: readonly ReconcileItem[], everyLive: boolean) {
      if (everyLive) due.clear();
      for (const { workload, current: a } of items) {
        const dueAt = a === null ? null : warningDueAt(a, LEAD_MS);
        if (dueAt === null || a?.deadlineAt == null) due.delete(workload.id);
        else due.set(workload.id, { dueAt, deadlineAt: a.deadlineAt });
      }
    },
    forget(ids: readonly string[]) {
      for (const id of ids) due.delete(id);
    },
    dueNow: (now: number) =>
      [...due].filter(([, d]) => d.dueAt <= now && now < d.deadlineAt).map(([id]) => id),
    nextAfter(after: number) {
      const later = [...due.values()].map((d) => d.dueAt).filter((t) => t > after);
      return later.length === 0 ? null : Math.min(...later);
    },
  };
}

describe("runway schedule", () => {
  test("dueNow and nextAfter agree with a scan of every entry, whatever the history", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
        const schedule = createRunwaySchedule();
        const plain = model();
        let now = 0;
        for (const op of ops) {
          if (op.kind === "note") {
            const items = op.items.map((i) => item(IDS[i.id] as string, i.deadline));
            schedule.note(items, () => LEAD_MS, op.everyLive);
            plain.note(items, op.everyLive);
          } else if (op.kind === "forget") {
            const ids = op.ids.map((i) => IDS[i] as string);
            schedule.forget(ids);
            plain.forget(ids);
          } else {
            now += op.afterMs;
            expect(schedule.dueNow(now).sort()).toEqual(plain.dueNow(now).sort());
            expect(schedule.nextAfter(now)).toBe(plain.nextAfter(now));
          }
        }
      }),
      { numRuns: 2000 },
    );
  });
});
