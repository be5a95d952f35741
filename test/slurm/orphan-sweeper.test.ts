/** Whose job is it: the owner id in the comment, and the owner id of a state dir. */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import {
  jobComment,
  loadOwnerId,
  OWNER_ID_PATTERN,
  ownedToken,
} from "../../src/orchestration/slurm/orphan-sweeper.ts";
import { newToken } from "../support/slurm-fixtures.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

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
    const dir = mkdtempSync(join(tmpdir(), "o4s-owner-"));
    dirs.push(dir);
    const first = loadOwnerId(join(dir, "slurm"));
    expect(first).toMatch(OWNER_ID_PATTERN);
    expect(loadOwnerId(join(dir, "slurm"))).toBe(first);
    expect(readFileSync(join(dir, "slurm", "owner-id"), "utf8")).toBe(`${first}\n`);
    writeFileSync(join(dir, "slurm", "owner-id"), "x,ALL\n");
    expect(() => loadOwnerId(join(dir, "slurm"))).toThrow();
  });
});
