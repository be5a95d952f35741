/** The client's path helpers (src/lib/posix-path.ts) give node:path's answers. */
import { describe, expect, test } from "bun:test";
import { isAbsolute, join, resolve } from "node:path";
import { isAbsolutePath, joinPath, resolveFrom, resolvePath } from "../../src/lib/posix-path.ts";

const PATHS = [
  "",
  ".",
  "..",
  "a",
  "a/b",
  "a/../b",
  "../../x",
  "./a/./b/",
  "a//b",
  "/",
  "//",
  "/a/b/../c",
  "/..",
  "/../a",
  "/a/",
  "sock.d/api.sock",
  "a/b/../../..",
  "..a/b..",
];
const BASES = ["/", "/home/u", "/home/u/", "/a/b/c"];

describe("posix paths as node:path", () => {
  test("resolve against an absolute base", () => {
    for (const base of BASES) {
      for (const p of PATHS)
        expect([base, p, resolvePath(base, p)]).toEqual([base, p, resolve(base, p)]);
    }
  });

  test("resolveFrom: as resolve, the base asked for only by a relative path", () => {
    for (const base of BASES) {
      for (const p of PATHS) {
        let asked = false;
        const got = resolveFrom(() => {
          asked = true;
          return base;
        }, p);
        expect([base, p, got, asked]).toEqual([base, p, resolve(base, p), !isAbsolute(p)]);
      }
    }
  });

  test("join", () => {
    for (const a of PATHS) {
      for (const b of ["", "x", "../y", "/z", "openai4s"]) {
        expect([a, b, joinPath(a, b)]).toEqual([a, b, join(a, b)]);
      }
    }
    expect(joinPath("/home/u", ".local", "state", "openai4s")).toBe(
      join("/home/u", ".local", "state", "openai4s"),
    );
  });

  test("isAbsolute", () => {
    for (const p of PATHS) expect([p, isAbsolutePath(p)]).toEqual([p, isAbsolute(p)]);
  });
});
