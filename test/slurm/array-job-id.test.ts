import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { expandIndexList, parseArrayJobId } from "../../src/adapters/backend-slurm/array-job-id.ts";
import { parseSacct } from "../../src/adapters/backend-slurm/parse.ts";
import { parseSqueue } from "../../src/adapters/backend-slurm/parse-squeue.ts";

describe("array job ids", () => {
  test("a plain id is a job, read as before", () => {
    expect(parseArrayJobId("517")).toEqual({ kind: "Job", jobId: "517" });
  });

  test("an element and a pending range name their array (forms measured on 22.05)", () => {
    expect(parseArrayJobId("517_3")).toEqual({
      kind: "Array",
      jobId: "517",
      task: { kind: "Element", index: 3 },
    });
    expect(parseArrayJobId("517_[0-3%2]")).toEqual({
      kind: "Array",
      jobId: "517",
      task: { kind: "Pending", indices: [0, 1, 2, 3] },
    });
    expect(parseArrayJobId("517_[1,4-6]")).toMatchObject({
      task: { kind: "Pending", indices: [1, 4, 5, 6] },
    });
    expect(expandIndexList("0-6:3")).toEqual([0, 3, 6]);
  });

  test("anything else is malformed, and a range is never expanded without bound", () => {
    for (const bad of [
      "",
      "0",
      "517_",
      "517_x",
      "517_01",
      "517_[]",
      "517_[3-1]",
      "517_[0-99999999]",
      "517_[0-9999999]",
      "517_9999999",
      "517_[0-3%2",
      "517.batch",
      "517_3.batch",
      "_3",
      "517_[0-3:0]",
    ]) {
      expect(parseArrayJobId(bad).kind).toBe("Malformed");
    }
  });

  test("arbitrary text never throws", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (raw) => {
        const id = parseArrayJobId(raw);
        if (id.kind !== "Malformed") expect(id.jobId).toMatch(/^[1-9][0-9]*$/);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("listings of an array", () => {
  test("squeue rows carry the array's id and their element (measured rows)", () => {
    const text =
      "517_1|h|COMPLETED|0|1795937085|1795937086|None|/w|h\n" +
      "517_3|h|FAILED|256|1795937085|1795937086|NonZeroExitCode|/w|h\n" +
      "517_[4-9%2]|h|PENDING|0|N/A|N/A|JobArrayTaskLimit|/w|h\n" +
      "437|o4s-a|RUNNING|0|1795937085|N/A|None|/w|o4s-a\n";
    const parsed = parseSqueue(text);
    if (parsed.kind !== "Parsed") throw new Error(parsed.message);
    expect(parsed.value.map((r) => [r.jobId, r.arrayTask])).toEqual([
      ["517", { kind: "Element", index: 1 }],
      ["517", { kind: "Element", index: 3 }],
      ["517", { kind: "Pending", indices: [4, 5, 6, 7, 8, 9] }],
      // A job that is no array has no arrayTask at all: its row is what it always was.
      ["437", undefined],
    ]);
    expect("arrayTask" in (parsed.value[3] ?? {})).toBe(false);
    expect(parsed.value[1]?.exit).toEqual({ code: 1, signal: 0 });
  });

  test("sacct rows of array elements parse (measured 22.05 form)", () => {
    const parsed = parseSacct(
      "517_0|h13probe2|COMPLETED|0:0|1|2|3|h13probe2\n517_3|h13probe2|FAILED|1:0|1|2|3|\n",
    );
    if (parsed.kind !== "Parsed") throw new Error(parsed.message);
    expect(parsed.value.map((r) => [r.jobId, r.arrayTask, r.exit?.code])).toEqual([
      ["517", { kind: "Element", index: 0 }, 0],
      ["517", { kind: "Element", index: 3 }, 1],
    ]);
  });
});
