/**
 * The change feed keeps the set of watched allocations without a steady answer (none yet,
 * or Indeterminate last time) as answers come, so the Slurm backend's steady call reads those
 * few again without looking through every watched allocation. Over generated histories of
 * opens (fresh, continued, a moved handle) and answers it must always be exactly what a
 * scan of the watch set finds: one missing would never be read again until it changed.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { createChangeFeed } from "../../src/core/change-feed.ts";
import type { ExternalHandle, SubmissionToken } from "../../src/core/models.ts";
import type {
  AllocationObservation,
  ObservationCursor,
  ObservationTarget,
} from "../../src/core/ports/allocation-backend.ts";

const ALLOCATIONS = 5;

const ANSWERS: readonly (AllocationObservation | null)[] = [
  null,
  { kind: "Indeterminate", message: "accounting lags" },
  ...(["QUEUED", "RUNNING", "COMPLETED"] as const).map(
    (phase): AllocationObservation => ({
      kind: "Observed",
      phase,
      reason: null,
      message: null,
      exitCode: phase === "COMPLETED" ? 0 : null,
      startedAt: null,
      endedAt: null,
    }),
  ),
];

interface Call {
  readonly fresh: boolean;
  /** Each target: an allocation and which of two handles it has now. */
  readonly targets: readonly { readonly allocation: number; readonly handle: number }[];
  /** The answer per allocation index (null: not in the backend's observations). */
  readonly answers: readonly number[];
}

const callArb: fc.Arbitrary<Call> = fc.record({
  fresh: fc.boolean(),
  targets: fc.array(fc.record({ allocation: fc.nat(ALLOCATIONS - 1), handle: fc.nat(1) }), {
    maxLength: ALLOCATIONS,
  }),
  answers: fc.array(fc.nat(ANSWERS.length - 1), {
    minLength: ALLOCATIONS,
    maxLength: ALLOCATIONS,
  }),
});

function target(allocation: number, handle: number): ObservationTarget {
  return {
    allocationId: `a${allocation}`,
    token: `t${allocation}` as SubmissionToken,
    handle: `${100 + allocation * 10 + handle}` as ExternalHandle,
  };
}

describe("change feed: the unsettled set", () => {
  test("always the watched allocations whose last answer is missing or Indeterminate", () => {
    fc.assert(
      fc.property(fc.array(callArb, { maxLength: 25 }), (calls) => {
        const feed = createChangeFeed("prop");
        let cursor: ObservationCursor | null = null;
        for (const call of calls) {
          const targets = call.targets.map((t) => target(t.allocation, t.handle));
          const opening = feed.open(call.fresh ? null : cursor, targets);
          if (opening.kind !== "Open") throw new Error("the current cursor expired");
          const observations = new Map<string, AllocationObservation>();
          for (const id of opening.watched.keys()) {
            const answer = ANSWERS[call.answers[Number(id.slice(1))] ?? 0] ?? null;
            if (answer !== null) observations.set(id, answer);
          }
          const answered = feed.answer(opening, targets, observations);
          if (answered.kind !== "Observed") throw new Error(answered.kind);
          cursor = answered.cursor;
          const scanned = [...opening.watched]
            .filter(([, e]) => e.last === undefined || e.last.kind === "Indeterminate")
            .map(([id]) => id);
          expect([...feed.unsettled()].sort()).toEqual(scanned.sort());
        }
      }),
      { numRuns: 1500 },
    );
  });
});
