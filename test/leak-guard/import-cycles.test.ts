/**
 * No import circle of more than two files in src/ (test/support/import-cycles.ts), with the
 * rule shown biting on planted circles in a copy of the tree.
 */
import { describe, expect, test } from "bun:test";
import { appendFileSync, cpSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importGraph, longCycles } from "../support/import-cycles.ts";
import { tempDirs } from "../support/temp-dir.ts";

const SRC = join(import.meta.dir, "..", "..", "src");

const shown = (cycles: readonly string[][]) => cycles.map((c) => c.join(" -> ")).join("\n");

describe("import circles", () => {
  test("none in src/ runs through more than two files", () => {
    expect(shown(longCycles(importGraph(SRC)))).toBe("");
  });

  test("two files importing each other are tolerated; a third closing a loop is not", () => {
    const graph = (edges: [string, string][]) => {
      const g = new Map<string, Set<string>>();
      for (const [a, b] of edges) {
        g.set(a, (g.get(a) ?? new Set()).add(b));
        if (!g.has(b)) g.set(b, new Set());
      }
      return g;
    };
    expect(
      longCycles(
        graph([
          ["a", "b"],
          ["b", "a"],
          ["a", "c"],
          ["c", "a"],
        ]),
      ),
    ).toEqual([]);
    expect(
      longCycles(
        graph([
          ["a", "b"],
          ["b", "c"],
          ["c", "a"],
        ]),
      ),
    ).toHaveLength(1);
    const twoWayLoop = graph([
      ["a", "b"],
      ["b", "a"],
      ["b", "c"],
      ["c", "b"],
      ["c", "a"],
      ["a", "c"],
    ]);
    expect(longCycles(twoWayLoop)).toHaveLength(1);
  });
});

describe("the guard bites (planted in a temporary copy)", () => {
  const newDir = tempDirs("o4s-cycles-", "each");

  test("the flag parser reading the composition again closes a circle", () => {
    const copy = join(newDir(), "src");
    cpSync(SRC, copy, { recursive: true });
    // As before the plugins: the list's context type read the parsed config.
    appendFileSync(
      join(copy, "apps", "daemon", "composition", "backends.ts"),
      'import type { DaemonSettings } from "../config.ts";\nexport type S = DaemonSettings;\n',
    );
    const found = shown(longCycles(importGraph(copy)));
    expect(found).toContain("apps/daemon/composition/backends.ts");
    expect(found).toContain("apps/daemon/config.ts");
  });

  test("type-only imports count: three files naming each other's types", () => {
    const copy = join(newDir(), "src");
    cpSync(SRC, copy, { recursive: true });
    const plant = (name: string, next: string) =>
      writeFileSync(
        join(copy, "core", `${name}.ts`),
        `import type { T as N } from "./${next}.ts";\nexport type T = N | "${name}";\n`,
      );
    plant("knot-a", "knot-b");
    plant("knot-b", "knot-c");
    plant("knot-c", "knot-a");
    expect(shown(longCycles(importGraph(copy)))).toBe(
      "core/knot-a.ts -> core/knot-b.ts -> core/knot-c.ts",
    );
  });
});
