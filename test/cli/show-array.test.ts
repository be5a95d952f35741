/**
 * `openai4s show`'s array block stays one screen for a large sweep: counts with the indices
 * that did not complete, at most 20 failed rows and how many more there are, and nothing at
 * all for one job or from a daemon that sends no `array`.
 */
import { describe, expect, test } from "bun:test";
import type { WorkloadBody } from "../../src/apps/cli/client.ts";
import { renderArray } from "../../src/apps/cli/show-array.ts";

type Allocation = WorkloadBody["allocations"][number];

function workload(array: Allocation["array"] | undefined): WorkloadBody {
  const allocation = {
    id: "a1",
    epoch: 1,
    phase: "FAILED",
    reason: "NONZERO_EXIT",
    submittedAt: null,
    startedAt: null,
    endedAt: null,
    deadline: null,
    backendJobId: "517",
    ...(array === undefined ? {} : { array }),
  } as Allocation;
  return { executionEpoch: 1, allocations: [allocation] } as unknown as WorkloadBody;
}

const failed = (index: number) => ({
  index,
  phase: "FAILED" as const,
  reason: "NONZERO_EXIT" as const,
  exitCode: 3,
});

/** "0,2,4,...,998": the longest index list there is. */
const everyOther = (from: number) =>
  Array.from({ length: 500 }, (_, i) => String(from + i * 2)).join(",");

describe("show: a job array's block", () => {
  test("counts, the failed indices, and each failed element with reason and exit code", () => {
    const out = renderArray(
      workload({
        size: 1000,
        maxConcurrent: 50,
        counts: { COMPLETED: 998, FAILED: 2 },
        indices: { COMPLETED: "0-16,18-399,401-999", FAILED: "17,400" },
        elements: [
          failed(17),
          { ...failed(400), reason: "OUT_OF_MEMORY" as const, exitCode: null },
        ],
        elementsOmitted: 0,
      }),
    );
    expect(out).toContain("Array:       1000 elements, at most 50 at once\n");
    expect(out).toContain("Elements:    998 completed, 2 failed (17,400)\n");
    expect(out).toMatch(/^17 +FAILED +NONZERO_EXIT +3$/m);
    expect(out).toMatch(/^400 +FAILED +OUT_OF_MEMORY +-$/m);
    expect(out).not.toContain("more not shown");
  });

  test("a broken sweep stays one screen: 20 rows, the rest counted, long index lists cut", () => {
    const elements = Array.from({ length: 100 }, (_, i) => failed(i * 2));
    const out = renderArray(
      workload({
        size: 1000,
        maxConcurrent: null,
        counts: { COMPLETED: 500, FAILED: 500 },
        indices: { COMPLETED: everyOther(1), FAILED: everyOther(0) },
        elements,
        elementsOmitted: 400,
      }),
    );
    expect(out.split("\n").filter((l) => /^\d+ +FAILED/.test(l))).toHaveLength(20);
    expect(out).toContain("(up to 480 more not shown");
    expect(out).toContain("Array:       1000 elements\n");
    const line = out.split("\n").find((l) => l.startsWith("Elements:")) ?? "";
    expect(line).toContain("500 completed, 500 failed (0,2,4,");
    expect(line).toContain("…)");
  });

  test("nothing for one job, nor from a daemon that sends no array", () => {
    expect(renderArray(workload(null))).toBe("");
    expect(renderArray(workload(undefined))).toBe("");
  });
});
