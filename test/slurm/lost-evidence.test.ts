/**
 * LOST only on evidence: a job absent from both the queue and accounting is LOST after
 * `lostMinObservations` observations AND `lostGraceMs`, never one observation early, nor
 * before the grace has passed (issue 33's survivor: fewer observations went unnoticed).
 */
import { describe, expect, test } from "bun:test";
import { absent } from "../../src/adapters/backend-slurm/observe-accounting.ts";
import type { Absence, SlurmContext } from "../../src/adapters/backend-slurm/slurm-context.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { silentLog } from "../../src/lib/log.ts";

function context(lostMinObservations: number, lostGraceMs: number) {
  const clock = manualClock(1_000_000);
  const ctx = {
    clock,
    log: silentLog,
    absences: new Map<string, Absence>(),
    lostMinObservations,
    lostGraceMs,
  } as unknown as SlurmContext;
  return { ctx, clock };
}

const TARGET = { allocationId: "a-1", handle: "437", token: "o4s-tok" } as never;

describe("absent: LOST needs both the count and the time", () => {
  test("with the grace passed, observations below the minimum stay Indeterminate", () => {
    const { ctx, clock } = context(3, 0);
    const kinds: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const o = absent(ctx, TARGET, "is gone");
      kinds.push(o.kind === "Observed" ? o.phase : o.kind);
      clock.advance(1000);
    }
    expect(kinds).toEqual(["Indeterminate", "Indeterminate", "LOST"]);
  });

  test("with the count reached, a grace not yet passed stays Indeterminate", () => {
    const { ctx, clock } = context(2, 60_000);
    expect(absent(ctx, TARGET, "is gone").kind).toBe("Indeterminate");
    clock.advance(59_999);
    expect(absent(ctx, TARGET, "is gone").kind).toBe("Indeterminate");
    clock.advance(1);
    const o = absent(ctx, TARGET, "is gone");
    expect(o.kind === "Observed" && o.phase).toBe("LOST");
  });

  test("a new job id for the allocation starts the count again", () => {
    const { ctx } = context(2, 0);
    expect(absent(ctx, TARGET, "is gone").kind).toBe("Indeterminate");
    const other = { allocationId: "a-1", handle: "438", token: "o4s-tok" } as never;
    expect(absent(ctx, other, "is gone").kind).toBe("Indeterminate");
  });
});
