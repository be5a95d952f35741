import { describe, expect, test } from "bun:test";
import { appendFileSync, cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  checkLeaks,
  findBackendImports,
  findContractLeaks,
  findSchedulerWords,
  formatViolations,
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
});
