/**
 * The session attempt record is parsed by the daemon on every start: hostile contents must
 * cost a bounded read and a refusal (issue 8: `{"ranks": 20000000}` cost gigabytes).
 */
import { describe, expect, test } from "bun:test";
import { symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  readSessionAttempt,
  SESSION_ATTEMPT_FILE,
} from "../../src/adapters/spool/session-preparer.ts";
import { tempDirs } from "../support/temp-dir.ts";

const newDir = tempDirs("o4s-attempt-", "each");
function dirWith(content: string | null): string {
  const dir = newDir();
  if (content !== null) writeFileSync(join(dir, SESSION_ATTEMPT_FILE), content);
  return dir;
}

describe("readSessionAttempt: capped, validated, bounded by the profile", () => {
  test("what the preparer writes is valid; a missing record is Missing", () => {
    expect(readSessionAttempt(dirWith('{"ranks":2}\n'), 2)).toEqual({
      kind: "Valid",
      record: { ranks: 2 },
    });
    expect(readSessionAttempt(dirWith(null), 2)).toEqual({ kind: "Missing" });
  });

  test.each([
    ["more ranks than the profile's nodes", '{"ranks":3}'],
    ["twenty million ranks", '{"ranks":20000000}'],
    ["the largest safe integer", '{"ranks":9007199254740991}'],
    ["zero", '{"ranks":0}'],
    ["a fraction", '{"ranks":1.5}'],
    ["a string", '{"ranks":"2"}'],
    ["an extra field", '{"ranks":1,"cmd":"x"}'],
    ["not JSON", "{ranks:"],
    ["an array", "[1]"],
  ])("%s is Invalid", (_label, content) => {
    const read = readSessionAttempt(dirWith(content), 2);
    expect(read.kind).toBe("Invalid");
  });

  test("a 1 GB file is refused without reading it: memory stays flat", () => {
    const dir = dirWith(null);
    const path = join(dir, SESSION_ATTEMPT_FILE);
    writeFileSync(path, '{"ranks":1');
    truncateSync(path, 1024 * 1024 * 1024); // sparse: no disk used
    Bun.gc(true);
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 5; i++) {
      const read = readSessionAttempt(dir, 2);
      expect(read.kind).toBe("Invalid");
      expect(read.kind === "Invalid" && read.message).toContain("bytes");
    }
    const grownBytes = process.memoryUsage().rss - before;
    expect(grownBytes).toBeLessThan(64 * 1024 * 1024);
  });

  test("a symbolic link is refused, not followed", () => {
    const dir = dirWith(null);
    const target = join(dir, "elsewhere.json");
    writeFileSync(target, '{"ranks":1}');
    symlinkSync(target, join(dir, SESSION_ATTEMPT_FILE));
    expect(readSessionAttempt(dir, 2).kind).toBe("Invalid");
  });
});
