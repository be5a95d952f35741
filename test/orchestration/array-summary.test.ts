import { describe, expect, test } from "bun:test";
import { checkArrayRequest } from "../../src/core/array/array-request.ts";
import { type ElementState, summarizeArray } from "../../src/core/array/array-summary.ts";
import { formatIndexRanges } from "../../src/core/array/index-ranges.ts";

const done: ElementState = { phase: "COMPLETED", reason: "EXITED_ZERO", exitCode: 0 };
const failed = (exitCode: number): ElementState => ({
  phase: "FAILED",
  reason: "NONZERO_EXIT",
  exitCode,
});
const running: ElementState = { phase: "RUNNING", reason: "STARTED", exitCode: null };
const queued: ElementState = { phase: "QUEUED", reason: "WAITING_FOR_RESOURCES", exitCode: null };

function states(size: number, at: (i: number) => ElementState | undefined) {
  const out = new Map<number, ElementState>();
  for (let i = 0; i < size; i += 1) {
    const s = at(i);
    if (s !== undefined) out.set(i, s);
  }
  return out;
}

describe("formatIndexRanges", () => {
  test("writes runs as ranges, sorted and de-duplicated", () => {
    expect(formatIndexRanges([9, 0, 1, 2, 3, 7, 10, 11, 12, 3])).toBe("0-3,7,9-12");
    expect(formatIndexRanges([])).toBe("");
  });
  test("stays short for scattered indices", () => {
    const evens = Array.from({ length: 1000 }, (_, i) => i * 2);
    expect(formatIndexRanges(evens, 3)).toBe("0,2,4 (+997 more)");
  });
});

describe("checkArrayRequest", () => {
  test("names the field it refuses", () => {
    expect(checkArrayRequest(0, undefined, 1001)).toMatchObject({ field: "array" });
    expect(checkArrayRequest(1002, undefined, 1001)).toMatchObject({ field: "array" });
    expect(checkArrayRequest(2.5, undefined, 1001)).toMatchObject({ field: "array" });
    expect(checkArrayRequest("10", undefined, 1001)).toMatchObject({ field: "array" });
    expect(checkArrayRequest(10, 0, 1001)).toMatchObject({ field: "maxConcurrent" });
    expect(checkArrayRequest(10, 11, 1001)).toMatchObject({ field: "maxConcurrent" });
  });
  test("accepts a size up to the backend's limit, with or without a cap", () => {
    expect(checkArrayRequest(1001, null, 1001)).toEqual({
      kind: "Valid",
      request: { size: 1001, maxConcurrent: null },
    });
    expect(checkArrayRequest(10, 3, 1001)).toEqual({
      kind: "Valid",
      request: { size: 10, maxConcurrent: 3 },
    });
  });
});

describe("summarizeArray", () => {
  test("COMPLETED only when every element completed", () => {
    const all = summarizeArray(
      1000,
      states(1000, () => done),
    );
    expect(all).toMatchObject({ phase: "COMPLETED", reason: "EXITED_ZERO", exitCode: 0 });
    expect(all.counts).toEqual({ COMPLETED: 1000 });
    expect(all.indices).toEqual({ COMPLETED: "0-999" });
    expect(all.elements).toEqual([]);
    // One element not reported: never read as completed.
    const missing = summarizeArray(
      1000,
      states(1000, (i) => (i === 500 ? undefined : done)),
    );
    expect(missing.phase).toBe("RUNNING");
    expect(missing.counts).toEqual({ COMPLETED: 999, UNKNOWN: 1 });
  });

  test("FAILED once all ended and any failed, naming how many and which", () => {
    const s = summarizeArray(
      1000,
      states(1000, (i) => (i === 17 || i === 400 ? failed(i === 17 ? 3 : 1) : done)),
    );
    expect(s).toMatchObject({ phase: "FAILED", reason: "NONZERO_EXIT", exitCode: 3 });
    expect(s.message).toContain("2 of 1000 elements failed (indices 17,400)");
    expect(s.elements).toEqual([
      { index: 17, ...failed(3) },
      { index: 400, ...failed(1) },
    ]);
  });

  test("a failure is named while the rest still run", () => {
    const s = summarizeArray(
      10,
      states(10, (i) => (i === 2 ? failed(1) : i < 5 ? done : running)),
    );
    expect(s.phase).toBe("RUNNING");
    expect(s.message).toBe(
      "10 elements: 4 completed, 1 failed, 5 running; 1 of 10 elements failed (index 2)",
    );
  });

  test("CANCELLED when all ended, none failed and some were cancelled", () => {
    const s = summarizeArray(
      4,
      states(4, (i) =>
        i < 2 ? done : { phase: "CANCELLED", reason: "USER_CANCELLED", exitCode: null },
      ),
    );
    expect(s).toMatchObject({ phase: "CANCELLED", reason: "USER_CANCELLED" });
  });

  test("QUEUED until an element starts, with the first waiting element's reason", () => {
    expect(
      summarizeArray(
        3,
        states(3, () => queued),
      ),
    ).toMatchObject({
      phase: "QUEUED",
      reason: "WAITING_FOR_RESOURCES",
    });
    expect(
      summarizeArray(
        3,
        states(3, (i) => (i === 0 ? done : queued)),
      ).phase,
    ).toBe("RUNNING");
  });

  test("stays compact: at most `limit` elements listed, the rest counted", () => {
    const s = summarizeArray(
      5000,
      states(5000, (i) => (i % 2 === 0 ? failed(1) : queued)),
      50,
    );
    expect(s.elements).toHaveLength(50);
    expect(s.elementsOmitted).toBe(4950);
    expect(JSON.stringify(s).length).toBeLessThan(12_000);
  });
});
