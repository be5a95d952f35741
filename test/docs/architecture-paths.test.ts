/**
 * docs/architecture.md names the tree's files and folders; when a file moved and the doc did
 * not, a reader was sent to paths that no longer exist (three were stale at once). Every
 * repository path the doc names in backticks must be a tracked file or folder, named whole or
 * by its trailing segments (`reconciler/lanes.ts` for src/core/reconciler/lanes.ts).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { KNOWN_LAYER_IMPORTS, UNIT_ALLOWANCES } from "../support/leak-guard.ts";
import { REPO_ROOT, trackedFiles } from "../support/tracked-files.ts";

const ROOT = REPO_ROOT;
const tracked = trackedFiles;

/** The first segments that make a backticked name a path of this repository. */
const TREE_ROOTS =
  /^(src|test|bench|docs|deploy|scripts|\.ci|core|adapters|servers|wire|apps|lib|backend-[a-z]+|store-sqlite|isolation-bwrap|reconciler|ports|ops|composition)\//;

/** Backticked names that are repository paths: a source file, or a folder of the tree. */
function namedPaths(doc: string): string[] {
  const names = [...doc.matchAll(/`([^`\s]+)`/g)].map((m) => m[1] ?? "");
  return [
    ...new Set(
      names.filter(
        (name) =>
          !/[<>{}*]/.test(name) &&
          !name.startsWith("/") &&
          (/\.(ts|sh)$/.test(name) ||
            (name.includes("/") && (/\.(md|toml|service)$/.test(name) || TREE_ROOTS.test(name)))),
      ),
    ),
  ];
}

function stalePaths(doc: string, files: readonly string[]): string[] {
  const entries = new Set(files);
  for (const file of files) {
    const parts = file.split("/");
    for (let i = 1; i < parts.length; i++) entries.add(`${parts.slice(0, i).join("/")}/`);
  }
  const all = [...entries];
  return namedPaths(doc).filter((p) => !all.some((e) => e === p || e.endsWith(`/${p}`)));
}

describe("docs/architecture.md names only paths that exist", () => {
  const files = tracked();
  const doc = readFileSync(join(ROOT, "docs", "architecture.md"), "utf8");

  test("it names paths (a pattern that matches nothing must not make this vacuous)", () => {
    expect(namedPaths(doc).length).toBeGreaterThan(40);
  });

  test("every path it names is tracked", () => {
    expect(stalePaths(doc, files)).toEqual([]);
  });

  test("a planted stale path is found, and a path named by its tail is not", () => {
    const planted = `${doc}\nSee \`isolation/through-backend.ts\` and \`reconciler/lanes.ts\`.\n`;
    expect(stalePaths(planted, files)).toEqual(["isolation/through-backend.ts"]);
  });
});

/**
 * The crossings the layer guard tolerates (test/support/leak-guard.ts: the designed ones and
 * those kept as debt), each of which the doc must name: it once said the debt list was empty
 * while it held two.
 */
function unlistedCrossings(doc: string): string[] {
  const named = (path: string) => doc.includes(`\`${path}\``);
  return [
    ...UNIT_ALLOWANCES.map((a) => a.unit),
    ...KNOWN_LAYER_IMPORTS.flatMap((k) => [k.file, k.target]),
  ].filter((path) => !named(path) && !named(`src/${path}`));
}

describe("docs/architecture.md names every crossing the layer guard tolerates", () => {
  const doc = readFileSync(join(ROOT, "docs", "architecture.md"), "utf8");

  test("each designed crossing and each kept as debt", () => {
    expect(unlistedCrossings(doc)).toEqual([]);
  });

  test("a crossing the doc does not name is found (planted: the doc without one)", () => {
    const cut = doc.replaceAll("adapters/store-sqlite/wal-checkpointer.ts", "(cut)");
    expect(unlistedCrossings(cut)).toContain("adapters/store-sqlite/wal-checkpointer.ts");
  });
});
