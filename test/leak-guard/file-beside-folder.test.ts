/**
 * Names that say what is inside: no `X.ts` beside a folder `X/`. `core/ports.ts` beside
 * `core/ports/`, `core/reconciler.ts` beside `core/reconciler/` hid which of the two held
 * what (the backend port, the loop) until one was opened.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { tempDirs } from "../support/temp-dir.ts";

const SRC = join(import.meta.dir, "..", "..", "src");

function besideFolders(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    const names = readdirSync(dir);
    for (const name of names) {
      const path = join(dir, name);
      if (!statSync(path).isDirectory()) continue;
      for (const ext of [".ts", ".tsx"])
        if (names.includes(`${name}${ext}`)) found.push(relative(root, `${path}${ext}`));
      walk(path);
    }
  };
  walk(root);
  return found;
}

describe("no file beside a folder of the same name", () => {
  const newDir = tempDirs("o4s-beside-", "each");

  test("in src/", () => {
    expect(besideFolders(SRC)).toEqual([]);
  });

  test("the check sees one (planted)", () => {
    const root = newDir();
    mkdirSync(join(root, "core", "ports"), { recursive: true });
    writeFileSync(join(root, "core", "ports.ts"), "export {};\n");
    writeFileSync(join(root, "core", "ports", "x.ts"), "export {};\n");
    expect(besideFolders(root)).toEqual(["core/ports.ts"]);
  });
});
