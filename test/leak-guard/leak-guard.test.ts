import { describe, expect, test } from "bun:test";
import {
  appendFileSync,
  cpSync,
  mkdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { BACKEND_LIST_FILE, listedBackends } from "../support/backend-list.ts";
import {
  BACKEND_PACKAGES,
  checkLeaks,
  findBackendImports,
  findContractLeaks,
  findCoreIo,
  findEnvReads,
  findLayerImports,
  findSchedulerWords,
  formatViolations,
  KNOWN_LAYER_IMPORTS,
  SCHEDULER_EXEMPT,
} from "../support/leak-guard.ts";
import { tempDirs } from "../support/temp-dir.ts";

const SRC = join(import.meta.dir, "..", "..", "src");

describe("INV-2 leak guard on the real tree", () => {
  test("no scheduler word outside the scheduler package and the composition root", () => {
    const violations = findSchedulerWords(SRC);
    expect(formatViolations(violations)).toBe("");
  });

  test("the core does no I/O: no fs, spawn, sockets or process.env", () => {
    expect(formatViolations(findCoreIo(SRC))).toBe("");
  });

  test("the environment is read in one place; every other module is handed it", () => {
    expect(formatViolations(findEnvReads(SRC))).toBe("");
  });

  test("the contracts' index reaches only contract modules", () => {
    expect(formatViolations(findContractLeaks(SRC))).toBe("");
  });

  test("only the composition root imports a backend package", () => {
    expect(formatViolations(findBackendImports(SRC))).toBe("");
  });

  test("every import respects the layers (core, wire, lib, adapters, servers, apps)", () => {
    expect(formatViolations(findLayerImports(SRC, KNOWN_LAYER_IMPORTS))).toBe("");
  });

  test("every crossing parked as debt still exists (else delete it), and no other", () => {
    const found = findLayerImports(SRC);
    expect(found.map((v) => `${v.file} -> ${v.detail.split(" ")[1]}`).sort()).toEqual(
      KNOWN_LAYER_IMPORTS.map((k) => `${k.file} -> ${k.target}`).sort(),
    );
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
    appendFileSync(join(copy, "core", "models.ts"), planted);
    const violations = findSchedulerWords(copy);
    expect(violations.some((v) => v.file === "core/models.ts" && v.detail === word)).toBe(true);
  });

  test("the composition root is not exempt: only the backend registry file is", () => {
    // The exemption once covered the whole composition/ folder, so any wiring module could
    // grow scheduler knowledge unnoticed.
    const copy = copyOfSrc();
    appendFileSync(
      join(copy, "apps", "daemon", "composition", "core.ts"),
      "// submitted with sbatch\n",
    );
    appendFileSync(
      join(copy, "apps", "daemon", "composition", "backends.ts"),
      "// submitted with sbatch\n",
    );
    const files = findSchedulerWords(copy).map((v) => v.file);
    expect(files).toEqual(["apps/daemon/composition/core.ts"]);
  });

  test("the guards' lists are the list of backends': a backend added there is guarded", async () => {
    // They were three hand-kept lists (exempt folders, backend packages, the broker file):
    // a third backend had to be added to each, and one forgotten went unguarded.
    expect(SCHEDULER_EXEMPT).toEqual(["adapters/backend-slurm/", BACKEND_LIST_FILE]);
    expect(BACKEND_PACKAGES).toEqual(["adapters/backend-local/", "adapters/backend-slurm/"]);
    const copy = copyOfSrc();
    // The copy's modules are imported: its packages resolve through the project's own.
    symlinkSync(join(SRC, "..", "node_modules"), join(copy, "..", "node_modules"));
    const folder = join(copy, "adapters", "backend-other");
    mkdirSync(folder);
    writeFileSync(
      join(folder, "plugin.ts"),
      [
        'import { localBackendPlugin } from "../backend-local/plugin.ts";',
        'export const otherPlugin = { ...localBackendPlugin, name: "other", schedulerBroker: "client.ts" };',
        "",
      ].join("\n"),
    );
    const list = join(copy, BACKEND_LIST_FILE);
    writeFileSync(
      list,
      readFileSync(list, "utf8")
        .replace(
          "export const BACKENDS",
          'import { otherPlugin } from "../../../adapters/backend-other/plugin.ts";\nexport const BACKENDS',
        )
        .replace(
          "registerBackend(slurmBackendPlugin),",
          "registerBackend(slurmBackendPlugin),\n  registerBackend(otherPlugin),",
        ),
    );
    expect(await listedBackends(copy)).toContainEqual({
      name: "other",
      folder: "adapters/backend-other/",
      schedulerBroker: "client.ts",
    });
  });

  test("a scheduler word in a file name", () => {
    const copy = copyOfSrc();
    writeFileSync(join(copy, "core", "qos-helpers.ts"), "export {};\n");
    expect(findSchedulerWords(copy).some((v) => v.file === "core/qos-helpers.ts")).toBe(true);
  });

  test("the contracts' index re-exporting an implementation module", () => {
    const copy = copyOfSrc();
    writeFileSync(join(copy, "core", "helper-impl.ts"), "export const x = 1;\n");
    appendFileSync(join(copy, "core", "index.ts"), 'export * from "./helper-impl.ts";\n');
    const violations = findContractLeaks(copy);
    expect(violations.map((v) => v.detail).join("\n")).toContain("core/helper-impl.ts");
  });

  test("a contract module importing an implementation module transitively", () => {
    const copy = copyOfSrc();
    const models = join(copy, "core", "models.ts");
    writeFileSync(
      models,
      `import "../adapters/store-sqlite/index.ts";\n${readFileSync(models, "utf8")}`,
    );
    expect(findContractLeaks(copy).some((v) => v.detail.includes("store-sqlite/index.ts"))).toBe(
      true,
    );
  });

  test("a core module importing a backend package", () => {
    const copy = copyOfSrc();
    appendFileSync(
      join(copy, "core", "ports", "allocation-backend.ts"),
      'import { x } from "../../adapters/backend-local/backend.ts";\nexport const y = x;\n',
    );
    const violations = findBackendImports(copy);
    expect(violations.some((v) => v.file === "core/ports/allocation-backend.ts")).toBe(true);
  });

  test.each([
    [
      "a value import",
      'import { getWorkload } from "../adapters/store-sqlite/ops/get-workload.ts";\n',
      "store-sqlite/",
    ],
    [
      "a type-only import",
      'import type { StoreDeps } from "../adapters/store-sqlite/deps.ts";\n',
      "store-sqlite/deps.ts",
    ],
    [
      "an inline type import",
      'import { type AppDeps } from "../servers/http/deps.ts";\n',
      "servers/http/deps.ts",
    ],
    ["a re-export", 'export * from "../servers/http/problem.ts";\n', "servers/http/problem.ts"],
    ["a type re-export", 'export type { Command } from "../apps/cli/list.ts";\n', "apps/cli/"],
    ["a side-effect import", 'import "../apps/daemon/daemon.ts";\n', "apps/daemon/daemon.ts"],
    [
      "a dynamic import()",
      'export const m = () => import("../apps/daemon/daemon.ts");\n',
      "apps/daemon/",
    ],
    [
      "a template-literal import()",
      "export const m = () => import(`../adapters/store-sqlite/index.ts`);\n",
      "store-sqlite/",
    ],
    ["a require()", 'export const m = () => require("../apps/cli/main.ts");\n', "apps/cli/main.ts"],
    [
      "a type query import()",
      'export type D = import("../adapters/store-sqlite/deps.ts").StoreDeps;\n',
      "store-sqlite/",
    ],
    ["a directory import", 'export * from "../adapters/store-sqlite";\n', "store"],
    [
      "the composition root",
      'import "../apps/daemon/composition/core.ts";\n',
      "apps/daemon/composition/core.ts",
    ],
    ["the worker binary", 'export type { W } from "../apps/worker/worker.ts";\n', "apps/worker/"],
    [
      "a computed import()",
      'const p = "../adapters/store-sqlite/index.ts";\nexport const m = () => import(p);\n',
      "computed",
    ],
  ])("the core importing an edge: %s", (_label, planted, expected) => {
    const copy = copyOfSrc();
    appendFileSync(join(copy, "core", "reclaimer.ts"), planted);
    const violations = findLayerImports(copy, KNOWN_LAYER_IMPORTS);
    expect(violations.length).toBeGreaterThan(0);
    expect(violations.every((v) => v.file === "core/reclaimer.ts")).toBe(true);
    expect(violations.map((v) => v.detail).join("\n")).toContain(expected);
    expect(checkLeaks(copy).some((v) => v.rule === "layer-import")).toBe(true);
  });

  test("a nested core module reaching an edge through several ../ is caught", () => {
    const copy = copyOfSrc();
    appendFileSync(
      join(copy, "core", "reconciler", "tick.ts"),
      'import type { Db } from "../../adapters/store-sqlite/database.ts";\nexport type X = Db;\n',
    );
    const violations = findLayerImports(copy, KNOWN_LAYER_IMPORTS);
    expect(violations.map((v) => `${v.file} ${v.detail}`).join("\n")).toContain(
      "core/reconciler/tick.ts imports adapters/store-sqlite/database.ts",
    );
  });

  test("imports inside the core and of shared leaf modules are not violations", () => {
    const copy = copyOfSrc();
    appendFileSync(
      join(copy, "core", "reclaimer.ts"),
      'import type { ReconcilerStore } from "./ports/reconciler-store.ts";\n' +
        'import { systemClock } from "../lib/clock.ts";\nexport type Y = ReconcilerStore;\n' +
        "export const z = systemClock;\n",
    );
    expect(findLayerImports(copy, KNOWN_LAYER_IMPORTS)).toEqual([]);
  });

  test.each([
    [
      "node:fs",
      'import { readFileSync } from "node:fs";\nexport const r = readFileSync;\n',
      "node:fs",
    ],
    ["fs/promises", 'export * as fsp from "node:fs/promises";\n', "node:fs/promises"],
    ["a spawn", 'import { spawn } from "node:child_process";\nexport const s = spawn;\n', "child"],
    ["the environment", 'export const home = process.env["HOME"];\n', "process.env"],
    ["Bun.spawn", 'export const run = () => Bun.spawn(["true"]);\n', "Bun.spawn"],
    ["a socket", "export const l = () => Bun.listen;\n", "Bun.listen"],
    ["the bun module", 'import { $ } from "bun";\nexport const d = $;\n', "bun"],
  ])("the core doing I/O: %s", (_label, planted, expected) => {
    const copy = copyOfSrc();
    appendFileSync(join(copy, "core", "reconciler", "decisions.ts"), planted);
    const violations = findCoreIo(copy);
    expect(violations.length).toBeGreaterThan(0);
    expect(violations.every((v) => v.file === "core/reconciler/decisions.ts")).toBe(true);
    expect(violations.map((v) => v.detail).join("\n")).toContain(expected);
  });

  test.each([
    [
      "process.env in the local backend",
      ["adapters", "backend-local", "profiles.ts"],
      'export const m = process.env["OPENAI4S_LOCAL_MEMORY_MB"];\n',
    ],
    [
      "process.env in the composition",
      ["apps", "daemon", "composition", "core.ts"],
      "export const e = process.env;\n",
    ],
    [
      "Bun.env in the worker",
      ["apps", "worker", "worker.ts"],
      'export const r = Bun.env["RANK"];\n',
    ],
    [
      "destructured in a server",
      ["servers", "http", "app.ts"],
      "export const { env } = process;\n",
    ],
    ["bracketed in the CLI", ["apps", "cli", "client.ts"], 'export const e = process["env"];\n'],
  ])("reading the environment outside its one reader: %s", (_label, path, planted) => {
    const copy = copyOfSrc();
    const name = path.join("/");
    appendFileSync(join(copy, ...path), planted);
    const violations = findEnvReads(copy);
    expect(violations.map((v) => `${v.file} ${v.rule}`)).toEqual([`${name} env-read`]);
  });

  test("a comment naming process.env is not a read", () => {
    const copy = copyOfSrc();
    appendFileSync(
      join(copy, "adapters", "backend-local", "profiles.ts"),
      "// process.env is read only at the entry\n/**\n * nor process.env here\n */\n",
    );
    expect(findEnvReads(copy)).toEqual([]);
  });

  test.each([
    [
      "an adapter importing another adapter",
      ["adapters", "backend-slurm", "parse.ts"],
      'import type { X } from "../backend-local/records.ts";\n',
      "adapters/backend-local/records.ts",
    ],
    [
      "the store adapter importing the sandbox adapter",
      ["adapters", "store-sqlite", "rows.ts"],
      'export * from "../isolation-bwrap/bubblewrap.ts";\n',
      "adapters/isolation-bwrap/bubblewrap.ts",
    ],
    [
      "an adapter importing a server",
      ["adapters", "spool", "batch-preparer.ts"],
      'import "../../servers/http/app.ts";\n',
      "servers/http/app.ts",
    ],
    [
      "a server importing an app",
      ["servers", "worker-gateway", "gateway.ts"],
      'import "../../apps/daemon/daemon.ts";\n',
      "apps/daemon/daemon.ts",
    ],
    [
      "a server importing another server",
      ["servers", "worker-gateway", "gateway.ts"],
      'import "../http/app.ts";\n',
      "servers/http/app.ts",
    ],
    [
      "wire importing the core",
      ["wire", "worker-protocol.ts"],
      'import type { Workload } from "../core/models.ts";\n',
      "core/models.ts",
    ],
    [
      "lib importing an adapter",
      ["lib", "durable-fs.ts"],
      'import "../adapters/store-sqlite/index.ts";\n',
      "adapters/store-sqlite/index.ts",
    ],
    [
      "the core importing an I/O part of lib",
      ["core", "steps.ts"],
      'import "../lib/durable-fs.ts";\n',
      "lib/durable-fs.ts",
    ],
  ])("a layer crossing: %s", (_label, path, planted, expected) => {
    const copy = copyOfSrc();
    const file = join(copy, ...(path as string[]));
    appendFileSync(file, planted as string);
    const violations = findLayerImports(copy, KNOWN_LAYER_IMPORTS);
    expect(violations.map((v) => `${v.file} ${v.detail}`).join("\n")).toContain(
      `${(path as string[]).join("/")} imports ${expected}`,
    );
  });
});
