/** The support layer's own promises: what other tests lean on must fail when it should. */
import { describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "./eventually.ts";
import { tempDir, tempDirs } from "./temp-dir.ts";

describe("eventually", () => {
  test("returns the first value that is not null, undefined or false; a throw is not yet", async () => {
    let calls = 0;
    const value = await eventually(
      () => {
        calls += 1;
        if (calls === 1) throw new Error("not there yet");
        if (calls === 2) return false;
        if (calls === 3) return null;
        return { calls };
      },
      { intervalMs: 1 },
    );
    expect(value).toEqual({ calls: 4 });
  });

  test("fails at the deadline naming what it awaited and the last thing seen", async () => {
    const failure = await eventually(
      () => {
        throw new Error("still QUEUED");
      },
      { what: "RUNNING", timeoutMs: 30, intervalMs: 5 },
    ).catch((error: Error) => error.message);
    expect(failure).toContain("RUNNING");
    expect(failure).toContain("still QUEUED");
  });
});

describe("temp dirs", () => {
  let kept = "";
  const make = tempDirs("o4s-support-", "each");

  test("a maker's dirs exist during the test", () => {
    kept = make();
    writeFileSync(join(kept, "f"), "x");
    expect(existsSync(join(kept, "f"))).toBe(true);
  });

  test("and are gone after it", () => {
    expect(kept).not.toBe("");
    expect(existsSync(kept)).toBe(false);
  });

  test("using: gone when the block ends, even when it throws", () => {
    let path = "";
    expect(() => {
      using dir = tempDir("o4s-support-");
      path = dir.path;
      writeFileSync(join(path, "f"), "x");
      throw new Error("an assertion failed");
    }).toThrow("an assertion failed");
    expect(path).not.toBe("");
    expect(existsSync(path)).toBe(false);
  });
});
