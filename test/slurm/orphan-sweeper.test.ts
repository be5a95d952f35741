/** Whose job is it: the owner id in the comment, and the owner id of a state dir. */
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import {
  jobComment,
  loadOwnerId,
  OWNER_ID_PATTERN,
  ownedToken,
} from "../../src/adapters/backend-slurm/orphan-sweeper.ts";
import { newToken } from "../support/slurm-fixtures.ts";
import { tempDirs } from "../support/temp-dir.ts";

const tempDir = tempDirs("o4s-owner-");

describe("orphan ownership", () => {
  test("a comment is ours only with our owner id, and gives back the token", () => {
    const token = newToken();
    expect(ownedToken(jobComment(token, "abcdefghijkl"), "abcdefghijkl")).toBe(token);
    expect(ownedToken(jobComment(token, "abcdefghijkl"), "zzzzzzzzzzzz")).toBeNull();
    expect(ownedToken(token, "abcdefghijkl")).toBeNull();
    expect(ownedToken(`${token}.abcdefghijkl.x`, "abcdefghijkl")).toBeNull();
  });

  test("no other comment is ever taken for ours", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (comment) => {
        const token = ownedToken(comment, "abcdefghijkl");
        if (token !== null) expect(comment).toBe(`${token}.abcdefghijkl`);
      }),
      { numRuns: 2000 },
    );
  });

  test("a state dir keeps one owner id; a tampered file is refused", () => {
    const dir = tempDir();
    const first = loadOwnerId(join(dir, "slurm"));
    expect(first).toMatch(OWNER_ID_PATTERN);
    expect(loadOwnerId(join(dir, "slurm"))).toBe(first);
    expect(readFileSync(join(dir, "slurm", "owner-id"), "utf8")).toBe(`${first}\n`);
    writeFileSync(join(dir, "slurm", "owner-id"), "x,ALL\n");
    expect(() => loadOwnerId(join(dir, "slurm"))).toThrow();
  });
});
