import { describe, expect, test } from "bun:test";
import { closeSync, fstatSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { preallocate } from "../../src/lib/preallocate.ts";
import { tempDir } from "../support/temp-dir.ts";

describe("preallocate", () => {
  test("takes the blocks, keeps the size, and appends still land at the end", () => {
    using dir = tempDir("o4s-prealloc-");
    const fd = openSync(join(dir.path, "f"), "a+", 0o600);
    try {
      writeSync(fd, "first\n");
      const before = fstatSync(fd);
      expect(preallocate(fd, before.size, 256 * 1024)).toEqual({ kind: "Preallocated" });
      const after = fstatSync(fd);
      expect(after.size).toBe(before.size);
      // st_blocks counts 512-byte units: at least the 256 KiB taken.
      expect(after.blocks * 512).toBeGreaterThanOrEqual(256 * 1024);
      writeSync(fd, "second\n");
      expect(fstatSync(fd).size).toBe("first\nsecond\n".length);
    } finally {
      closeSync(fd);
    }
  });

  test("a failing call is named, never thrown", () => {
    expect(preallocate(-1, 0, 4096)).toMatchObject({ kind: "Failed" });
    expect(
      preallocate(3, 0, 4096, () => {
        throw new Error("no libc");
      }),
    ).toEqual({ kind: "Failed", message: "cannot call fallocate: Error: no libc" });
  });
});
