/**
 * A job array's elements.jsonl read as it grows: a reader that keeps what it read
 * (the backend's cache) reads only what was appended and ends where a fresh read of the
 * whole file ends, a line cut short is left for the next read, and a record that is not one
 * the supervisor wrote is refused rather than trusted.
 */
import { describe, expect, test } from "bun:test";
import { appendFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  cgroupOwnerToken,
  type ElementsCache,
  readElements,
  recordElementStart,
} from "../../src/adapters/backend-local/array-records.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-array-records-", "each");
const start = (pid: number) => ({ pid, startTicks: "1", bootId: "b", startedAt: pid });
const exit = (code: number) => ({
  reason: "EXITED" as const,
  exitCode: code,
  signal: null,
  message: `exited with code ${code}`,
  startedAt: 1,
  endedAt: 2,
});

describe("elements.jsonl", () => {
  test("read as it grows, a cached reader agrees with a fresh read at every step", () => {
    const dir = tempDir();
    const cache: ElementsCache = new Map();
    expect(readElements(dir, 3, cache).size).toBe(0);
    const steps: (() => void)[] = [
      () => recordElementStart(dir, 0, start(10)),
      () => recordElementStart(dir, 1, start(11)),
      // A whole line, then one cut short by a supervisor that died mid-write: the first
      // is read, the second not yet...
      () =>
        appendFileSync(
          join(dir, "elements.jsonl"),
          `${JSON.stringify({ index: 0, exit: exit(0) })}\n{"index":1,"exit":{"reason":"EX`,
        ),
      // ...and read whole once the rest of it is there.
      () =>
        appendFileSync(
          join(dir, "elements.jsonl"),
          'ITED","exitCode":4,"signal":null,"message":"m","startedAt":1,"endedAt":2}}\n',
        ),
      () => recordElementStart(dir, 2, start(12)),
    ];
    for (const step of steps) {
      step();
      expect(readElements(dir, 3, cache)).toEqual(readElements(dir, 3));
    }
    const last = readElements(dir, 3, cache);
    expect(last.get(1)).toEqual({ start: start(11), exit: { ...exit(4), message: "m" } });
    expect(last.get(2)).toEqual({ start: start(12), exit: null });
    // Nothing appended: the same answer, nothing re-read.
    expect(readElements(dir, 3, cache)).toBe(last);
  });

  test("refused: an element past the array's size, a line that is no record, a link", () => {
    const beyond = tempDir();
    recordElementStart(beyond, 5, start(1));
    expect(() => readElements(beyond, 3)).toThrow("names element 5 of 3");
    const garbage = tempDir();
    writeFileSync(join(garbage, "elements.jsonl"), '{"index":0,"start":{"pid":"x"}}\n');
    expect(() => readElements(garbage, 3)).toThrow();
    const linked = tempDir();
    writeFileSync(join(linked, "elsewhere"), "");
    symlinkSync(join(linked, "elsewhere"), join(linked, "elements.jsonl"));
    expect(() => readElements(linked, 3)).toThrow();
  });

  test("an element's cgroup belongs to its array's token", () => {
    expect(cgroupOwnerToken("o4s-abc.17")).toBe("o4s-abc");
    expect(cgroupOwnerToken("o4s-abc")).toBe("o4s-abc");
  });
});
