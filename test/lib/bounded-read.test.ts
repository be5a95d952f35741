import { describe, expect, test } from "bun:test";
import { closeSync, openSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readTextCapped, readUpTo } from "../../src/lib/bounded-read.ts";
import { tempDirs } from "../support/temp-dir.ts";

const dirs = tempDirs("o4s-bounded-read-");

describe("readTextCapped", () => {
  test("reads a small file whole, and one of exactly the cap", () => {
    const dir = dirs();
    writeFileSync(join(dir, "small"), "{}");
    expect(readTextCapped(join(dir, "small"), 1024)).toEqual({ kind: "Read", text: "{}" });
    const text = "x".repeat(5000);
    writeFileSync(join(dir, "exact"), text);
    expect(readTextCapped(join(dir, "exact"), 5000)).toEqual({ kind: "Read", text });
  });

  test("a file over the cap is TooLarge, a missing one Missing, a link NotAFile", () => {
    const dir = dirs();
    writeFileSync(join(dir, "big"), "y".repeat(2049));
    expect(readTextCapped(join(dir, "big"), 2048)).toEqual({ kind: "TooLarge", sizeBytes: 2049 });
    expect(readTextCapped(join(dir, "none"), 10)).toEqual({ kind: "Missing" });
    symlinkSync(join(dir, "big"), join(dir, "link"));
    expect(readTextCapped(join(dir, "link"), 10_000)).toEqual({ kind: "NotAFile" });
  });

  test("a multi-byte text of several kilobytes comes back intact (the buffer grows by copying)", () => {
    const dir = dirs();
    const text = "é→𝄞".repeat(3000);
    writeFileSync(join(dir, "utf8"), text);
    expect(readTextCapped(join(dir, "utf8"), 1 << 20)).toEqual({ kind: "Read", text });
  });

  test("a file that grew after its size was taken is read to the limit, never beyond", () => {
    // The size handed in is what fstat said before the file grew: the buffer must grow by
    // copying what was read, and stop at the limit.
    const dir = dirs();
    const path = join(dir, "grown");
    const text = "0123456789".repeat(1000);
    writeFileSync(path, text);
    const fd = openSync(path, "r");
    try {
      const all = readUpTo(fd, 3, 1 << 20);
      expect(all.buffer.subarray(0, all.bytes).toString("utf8")).toBe(text);
    } finally {
      closeSync(fd);
    }
    const capped = openSync(path, "r");
    try {
      const some = readUpTo(capped, 3, 7001);
      expect(some.bytes).toBe(7001);
      expect(some.buffer.subarray(0, some.bytes).toString("utf8")).toBe(text.slice(0, 7001));
    } finally {
      closeSync(capped);
    }
  });
});
