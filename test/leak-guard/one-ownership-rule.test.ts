/**
 * One ownership rule (core/principals.ts: `mayUse`, `listScope`, `ownerOf`), applied by every
 * door: before, the rule "the admin sees all, a principal its own" was written out in nine
 * places (a path check in app.ts, each list handler, the Jupyter sessions and contents, MCP's
 * tools and resources, /ui), and `submitterFor` was copied into the Jupyter routes. A copy
 * that drifts (a principal's list that forgets its owner filter) shows another's work. This
 * guard fails on a new copy; the rule itself is tested here too.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { ADMIN, type Caller, listScope, mayUse, ownerOf } from "../../src/core/principals.ts";

const SRC = join(import.meta.dir, "..", "..", "src");
/** The rule, and the one submitter every door that submits calls. */
const RULE_FILES = new Set(["core/principals.ts", "servers/http/submitter.ts"]);

/** What a hand-written copy of the rule looks like. */
const COPIES = [
  /caller\.kind\s*===\s*"Admin"\s*\|\|/,
  /caller\.kind\s*===\s*"Principal"\s*\?\s*\{\s*owner/,
  /\.owner\s*(?:\?\?\s*null\)?\s*)?[!=]==\s*(?:ctx\.)?caller\.name/,
  /caller\.name\s*[!=]==\s*\w+\.owner/,
  /function\s+(?:submitterFor|ownerOf)\b/,
];

function copiesIn(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.tsx?$/.test(name) && !RULE_FILES.has(relative(root, path))) {
        readFileSync(path, "utf8")
          .split("\n")
          .forEach((line, i) => {
            if (COPIES.some((copy) => copy.test(line)))
              found.push(`${relative(root, path)}:${i + 1}: ${line.trim()}`);
          });
      }
    }
  };
  walk(root);
  return found;
}

const alice: Caller = { kind: "Principal", name: "alice", tokenId: null };

describe("one ownership rule", () => {
  test("the admin uses every workload; a principal only its own; none uses a missing one", () => {
    expect(mayUse(ADMIN, null)).toBe(true);
    expect(mayUse(ADMIN, "alice")).toBe(true);
    expect(mayUse(ADMIN, undefined)).toBe(false);
    expect(mayUse(alice, "alice")).toBe(true);
    expect(mayUse(alice, "bob")).toBe(false);
    expect(mayUse(alice, null)).toBe(false);
    expect(mayUse(alice, undefined)).toBe(false);
  });

  test("a principal's lists are narrowed to its own; the admin's are not", () => {
    expect(listScope(alice)).toEqual({ owner: "alice" });
    expect(listScope(ADMIN)).toEqual({});
    expect(ownerOf(alice)).toBe("alice");
    expect(ownerOf(ADMIN)).toBeNull();
  });

  test("no door writes the rule out again", () => {
    expect(copiesIn(SRC)).toEqual([]);
  });

  test("the guard sees a copy (each shape the doors used to write)", () => {
    const lines = [
      'return caller.kind === "Admin" || w.owner === caller.name;',
      '...(caller.kind === "Principal" ? { owner: caller.name } : {}),',
      "(workload.owner ?? null) === ctx.caller.name",
      "function submitterFor(caller: Caller): Submitter {",
    ];
    for (const line of lines) expect(COPIES.some((copy) => copy.test(line))).toBe(true);
  });
});
