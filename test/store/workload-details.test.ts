/**
 * The batched read paths (list and show) return exactly what the per-workload queries
 * return, for every filter and cursor, over a store with sessions (conditions), batches,
 * several attempts and none.
 */
import { afterEach, describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  createWorkload,
  getWorkload,
  getWorkloadDetails,
  listAllocations,
  listConditions,
  listWorkloadDetails,
  listWorkloads,
  mintAttempts,
  openDatabase,
  type StoreDeps,
  setCondition,
} from "../../src/adapters/store-sqlite/index.ts";
import { CONDITION_TYPES, mintSubmissionToken, PHASES } from "../../src/core/models.ts";
import { manualClock } from "../../src/lib/clock.ts";

let closers: (() => void)[] = [];
afterEach(() => {
  for (const c of closers) c();
  closers = [];
});

function seeded(spec: readonly { session: boolean; attempts: number; conditions: number }[]) {
  const clock = manualClock();
  const opened = openDatabase(":memory:");
  closers.push(() => opened.close());
  const deps: StoreDeps = { db: opened.db, clock };
  let n = 0;
  const random = (k: number) => Uint8Array.from({ length: k }, () => (n++ * 37) & 0xff);
  spec.forEach((s, i) => {
    clock.advance(i % 3 === 0 ? 0 : 1); // equal createdAt too: the cursor's tie-break
    const id = `w${String(i).padStart(3, "0")}`;
    createWorkload(deps, {
      id,
      kind: s.session ? "SESSION" : "BATCH",
      name: id,
      profile: "default",
      spec: { command: ["true"] },
      maxAttempts: 3,
      idempotencyKey: null,
      requestHash: null,
    });
    for (let a = 0; a < s.attempts; a++) {
      mintAttempts(deps, [
        {
          workloadId: id,
          allocationId: `${id}-a${a}`,
          token: mintSubmissionToken(random),
          expectedEpoch: a,
          message: "m",
        },
      ]);
      // Only one active attempt at a time: end the previous one by hand.
      if (a < s.attempts - 1) {
        deps.db.$client
          .query("UPDATE allocations SET phase = 'LOST' WHERE id = ?")
          .run(`${id}-a${a}`);
      }
    }
    const types = CONDITION_TYPES;
    for (const type of types.slice(0, s.conditions)) {
      setCondition(deps, id, { type, status: "TRUE", reason: "R", message: `${type} of ${id}` });
    }
  });
  return deps;
}

const perWorkload = (deps: StoreDeps, id: string) => {
  const workload = getWorkload(deps, id);
  if (!workload) return null;
  return {
    workload,
    conditions: [...listConditions(deps, id)].sort((a, b) => a.type.localeCompare(b.type)),
    allocations: listAllocations(deps, id),
  };
};

describe("batched workload reads", () => {
  test("every page, filter and cursor equals the per-workload queries", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            session: fc.boolean(),
            attempts: fc.integer({ min: 0, max: 3 }),
            conditions: fc.integer({ min: 0, max: 5 }),
          }),
          { maxLength: 25 },
        ),
        fc.integer({ min: 1, max: 7 }),
        fc.option(fc.constantFrom("BATCH" as const, "SESSION" as const), { nil: undefined }),
        fc.option(fc.constantFrom(...PHASES), { nil: undefined }),
        (spec, limit, kind, phase) => {
          const deps = seeded(spec);
          let cursor: { createdAt: number; id: string } | undefined;
          for (let pages = 0; pages < 30; pages++) {
            const q = {
              limit,
              ...(kind ? { kind } : {}),
              ...(phase ? { phase } : {}),
              ...(cursor ? { cursor } : {}),
            };
            const old = listWorkloads(deps, q);
            const batched = listWorkloadDetails(deps, q);
            expect(batched.next).toEqual(old.next);
            expect<unknown>(
              batched.items.map((d) => ({
                ...d,
                conditions: [...d.conditions].sort((a, b) => a.type.localeCompare(b.type)),
              })),
            ).toEqual(old.items.map((w) => perWorkload(deps, w.id)));
            if (!old.next) break;
            cursor = old.next;
          }
          for (let i = 0; i < spec.length; i++) {
            const id = `w${String(i).padStart(3, "0")}`;
            const one = getWorkloadDetails(deps, id);
            expect(
              one && {
                ...one,
                conditions: [...one.conditions].sort((a, b) => a.type.localeCompare(b.type)),
              },
            ).toEqual(perWorkload(deps, id));
          }
          expect(getWorkloadDetails(deps, "nope")).toBeNull();
        },
      ),
      { numRuns: 60 },
    );
  });
});
