import { describe, expect, test } from "bun:test";
import { appendFileSync, cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  checkLeaks,
  findBackendImports,
  findContractLeaks,
  findCoreImports,
  findSchedulerWords,
  formatViolations,
  KNOWN_CORE_IMPORTS,
} from "../support/leak-guard.ts";
import { tempDirs } from "../support/temp-dir.ts";

const SRC = join(import.meta.dir, "..", "..", "src");

describe("INV-2 leak guard on the real tree", () => {
  test("no scheduler word outside the scheduler package and the composition root", () => {
    const violations = findSchedulerWords(SRC);
    expect(formatViolations(violations)).toBe("");
  });

  test("the contracts' index reaches only contract modules", () => {
    expect(formatViolations(findContractLeaks(SRC))).toBe("");
  });

  test("only the composition root imports a backend package", () => {
    expect(formatViolations(findBackendImports(SRC))).toBe("");
  });

  test("the core imports nothing from store, api, daemon or cli", () => {
    expect(formatViolations(findCoreImports(SRC, KNOWN_CORE_IMPORTS))).toBe("");
  });

  test("every known exception to the core's import rule still exists (else delete it)", () => {
    const found = findCoreImports(SRC);
    for (const known of KNOWN_CORE_IMPORTS) {
      expect(found.some((v) => v.file === known.file && v.detail.includes(known.target))).toBe(
        true,
      );
    }
  });
});

describe("the guard fails when the rule is broken (planted in a temporary copy)", () => {
  const newDir = tempDirs("o4s-leak-", "each");

  function copyOfSrc(): string {
    const dir = newDir();
    const copy = join(dir, "src");
    cpSync(SRC, copy, { recursive: true });
    expect(checkLeaks(copy)).toEqual([]);
    return copy;
  }

  test.each([
    ["a word in a comment", "// submitted with sbatch\n", "sbatch"],
    ["a word in an identifier, any case", "export const defaultPartition = 1;\n", "partition"],
    ["an environment variable name", 'export const rank = process.env["SLURM_PROCID"];\n', "slurm"],
    ["a substring inside a word", "export const isRunning = true;\n", "srun"],
  ])("%s", (_label, planted, word) => {
    const copy = copyOfSrc();
    appendFileSync(join(copy, "orchestration", "models.ts"), planted);
    const violations = findSchedulerWords(copy);
    expect(violations.some((v) => v.file === "orchestration/models.ts" && v.detail === word)).toBe(
      true,
    );
  });

  test("the composition root is not exempt: only the backend registry file is", () => {
    // The exemption once covered the whole composition/ folder, so any wiring module could
    // grow scheduler knowledge unnoticed.
    const copy = copyOfSrc();
    appendFileSync(join(copy, "composition", "core.ts"), "// submitted with sbatch\n");
    appendFileSync(join(copy, "composition", "backends.ts"), "// submitted with sbatch\n");
    const files = findSchedulerWords(copy).map((v) => v.file);
    expect(files).toEqual(["composition/core.ts"]);
  });

  test("a scheduler word in a file name", () => {
    const copy = copyOfSrc();
    writeFileSync(join(copy, "orchestration", "qos-helpers.ts"), "export {};\n");
    expect(findSchedulerWords(copy).some((v) => v.file === "orchestration/qos-helpers.ts")).toBe(
      true,
    );
  });

  test("the contracts' index re-exporting an implementation module", () => {
    const copy = copyOfSrc();
    writeFileSync(join(copy, "orchestration", "helper-impl.ts"), "export const x = 1;\n");
    appendFileSync(join(copy, "orchestration", "index.ts"), 'export * from "./helper-impl.ts";\n');
    const violations = findContractLeaks(copy);
    expect(violations.map((v) => v.detail).join("\n")).toContain("orchestration/helper-impl.ts");
  });

  test("a contract module importing an implementation module transitively", () => {
    const copy = copyOfSrc();
    const models = join(copy, "orchestration", "models.ts");
    writeFileSync(models, `import "../store/index.ts";\n${readFileSync(models, "utf8")}`);
    expect(findContractLeaks(copy).some((v) => v.detail.includes("store/index.ts"))).toBe(true);
  });

  test("a core module importing a backend package", () => {
    const copy = copyOfSrc();
    appendFileSync(
      join(copy, "orchestration", "ports.ts"),
      'import { x } from "./local/index.ts";\nexport const y = x;\n',
    );
    const violations = findBackendImports(copy);
    expect(violations.some((v) => v.file === "orchestration/ports.ts")).toBe(true);
  });

  test.each([
    ["a value import", 'import { getWorkload } from "../store/ops/get-workload.ts";\n', "store/"],
    ["a type-only import", 'import type { StoreDeps } from "../store/deps.ts";\n', "store/deps.ts"],
    ["an inline type import", 'import { type AppDeps } from "../api/deps.ts";\n', "api/deps.ts"],
    ["a re-export", 'export * from "../api/problem.ts";\n', "api/problem.ts"],
    ["a type re-export", 'export type { Command } from "../cli/command.ts";\n', "cli/"],
    ["a side-effect import", 'import "../daemon/daemon.ts";\n', "daemon/daemon.ts"],
    ["a dynamic import()", 'export const m = () => import("../daemon/daemon.ts");\n', "daemon/"],
    [
      "a template-literal import()",
      "export const m = () => import(`../store/index.ts`);\n",
      "store/",
    ],
    ["a require()", 'export const m = () => require("../cli/main.ts");\n', "cli/main.ts"],
    ["a type query import()", 'export type D = import("../store/deps.ts").StoreDeps;\n', "store/"],
    ["a directory import", 'export * from "../store";\n', "store"],
    ["the composition root", 'import "../composition-root.ts";\n', "composition-root.ts"],
    ["the worker binary", 'export type { W } from "../worker/index.ts";\n', "worker/"],
    [
      "a computed import()",
      'const p = "../store/index.ts";\nexport const m = () => import(p);\n',
      "computed",
    ],
  ])("the core importing an edge: %s", (_label, planted, expected) => {
    const copy = copyOfSrc();
    appendFileSync(join(copy, "orchestration", "reclaimer.ts"), planted);
    const violations = findCoreImports(copy, KNOWN_CORE_IMPORTS);
    expect(violations.length).toBeGreaterThan(0);
    expect(violations.every((v) => v.file === "orchestration/reclaimer.ts")).toBe(true);
    expect(violations.map((v) => v.detail).join("\n")).toContain(expected);
    expect(checkLeaks(copy).some((v) => v.rule === "core-import")).toBe(true);
  });

  test("a nested core module reaching an edge through several ../ is caught", () => {
    const copy = copyOfSrc();
    appendFileSync(
      join(copy, "orchestration", "reconciler", "tick.ts"),
      'import type { Db } from "../../store/database.ts";\nexport type X = Db;\n',
    );
    const violations = findCoreImports(copy, KNOWN_CORE_IMPORTS);
    expect(violations.map((v) => `${v.file} ${v.detail}`).join("\n")).toContain(
      "orchestration/reconciler/tick.ts imports store/database.ts",
    );
  });

  test("imports inside the core and of shared leaf modules are not violations", () => {
    const copy = copyOfSrc();
    appendFileSync(
      join(copy, "orchestration", "reclaimer.ts"),
      'import type { ReconcilerStore } from "./ports/reconciler-store.ts";\n' +
        'import { systemClock } from "../clock.ts";\nexport type Y = ReconcilerStore;\n' +
        "export const z = systemClock;\n",
    );
    expect(findCoreImports(copy, KNOWN_CORE_IMPORTS)).toEqual([]);
  });
});
