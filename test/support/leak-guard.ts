/**
 * INV-2 (Backend Opacity), checked rather than wished for. The orchestration core's source
 * and import graph never mention a scheduler; that vocabulary lives only in the scheduler's
 * backend package and in the one file of the composition root that chooses and wires
 * backends (the registry, composition/backends.ts): the rest of the root is checked too.
 *
 * Four claims, each a function over a source tree so a test can run them on a doctored copy:
 *  (a) no file outside the exempt paths contains a scheduler word, comments included;
 *  (b) the import graph from the contracts' index reaches only contract modules;
 *  (c) no module outside the composition root imports a backend package;
 *  (d) the core (orchestration/) imports nothing from the edges (store, api, daemon, cli):
 *      it owns its ports and the edges implement or call them, never the other way round.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

/** Substrings, case-insensitive. Deliberately substring, not word, matching: stricter wins. */
export const SCHEDULER_WORDS = [
  "slurm",
  "sbatch",
  "squeue",
  "sacct",
  "scancel",
  "srun",
  "scontrol",
  "partition",
  "qos",
  "slurm_",
] as const;

/** Paths (relative to src/) allowed to name the scheduler. */
export const SCHEDULER_EXEMPT = ["orchestration/slurm/", "composition/backends.ts"] as const;

/** Backend packages: only the composition root (and the package itself) may import them. */
export const BACKEND_PACKAGES = ["orchestration/slurm/", "orchestration/local/"] as const;

/** The composition root, a folder: every module in it may import a backend package. */
export const COMPOSITION_ROOT = "composition/";
export const CONTRACTS_INDEX = "orchestration/index.ts";

/** The modules that make up the contracts; everything else is implementation. */
export const CONTRACT_MODULES = [
  "orchestration/index.ts",
  "orchestration/models.ts",
  "orchestration/ports.ts",
  "orchestration/attempt-preparer.ts",
  "orchestration/sandbox.ts",
] as const;

/** The core: what it imports must come from itself or from shared leaf modules. */
export const CORE = "orchestration/";
/**
 * The edges the core must not import, type-only imports and dynamic import() included: the
 * store, the API, the daemon and the CLI, and the rooms that import the core to wire or
 * run it (the composition root, the worker binary), where an arrow back would be a cycle.
 */
export const EDGES = [
  "store/",
  "api/",
  "daemon/",
  "cli/",
  "composition/",
  "composition-root.ts",
  "worker/",
  "main.ts",
] as const;
/**
 * Core-to-edge imports still in the tree, each with the change that removes it. The test on
 * the real tree fails when one of them is gone, so the list cannot outlive its reason.
 */
export const KNOWN_CORE_IMPORTS: readonly { readonly file: string; readonly target: string }[] = [];

export interface Violation {
  readonly rule: "scheduler-word" | "contracts-import" | "backend-import" | "core-import";
  readonly file: string;
  readonly line: number;
  readonly detail: string;
}

function walk(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...walk(path));
    else out.push(path);
  }
  return out;
}

function rel(srcRoot: string, file: string): string {
  return relative(srcRoot, file).split(sep).join("/");
}

/** (a) Every file, any extension: a word in a .py or .sql file leaks just as well. */
export function findSchedulerWords(srcRoot: string): Violation[] {
  const violations: Violation[] = [];
  for (const file of walk(srcRoot)) {
    const name = rel(srcRoot, file);
    if (SCHEDULER_EXEMPT.some((p) => (p.endsWith("/") ? name.startsWith(p) : name === p))) continue;
    const lines = readFileSync(file, "utf8").split("\n");
    lines.forEach((text, i) => {
      const lower = text.toLowerCase();
      for (const word of SCHEDULER_WORDS) {
        if (lower.includes(word)) {
          violations.push({ rule: "scheduler-word", file: name, line: i + 1, detail: word });
        }
      }
    });
  }
  // The file names themselves count too.
  for (const file of walk(srcRoot)) {
    const name = rel(srcRoot, file);
    if (SCHEDULER_EXEMPT.some((p) => (p.endsWith("/") ? name.startsWith(p) : name === p))) continue;
    for (const word of SCHEDULER_WORDS) {
      if (name.toLowerCase().includes(word)) {
        violations.push({ rule: "scheduler-word", file: name, line: 0, detail: `path: ${word}` });
      }
    }
  }
  return violations;
}

const transpiler = new Bun.Transpiler({ loader: "ts" });
// The /ui pages are .tsx: JSX is not TypeScript to the "ts" loader, which refuses them.
const tsxTranspiler = new Bun.Transpiler({ loader: "tsx" });

function lineOf(source: string, needle: string): number {
  const index = source.indexOf(needle);
  return index < 0 ? 0 : source.slice(0, index).split("\n").length;
}

/** Relative imports of a module, resolved to paths relative to srcRoot (non-relative kept). */
export function importsOf(
  srcRoot: string,
  file: string,
): { readonly specifier: string; readonly target: string }[] {
  // A shebang line is not TypeScript; the transpiler refuses it.
  const source = readFileSync(file, "utf8").replace(/^#!.*/, "");
  const scanned = (file.endsWith(".tsx") ? tsxTranspiler : transpiler).scanImports(source);
  return scanned.map((imp) => {
    if (!imp.path.startsWith(".")) return { specifier: imp.path, target: imp.path };
    return { specifier: imp.path, target: rel(srcRoot, resolve(dirname(file), imp.path)) };
  });
}

/** (b) Breadth-first over the import graph from the contracts' index. */
export function findContractLeaks(srcRoot: string): Violation[] {
  const violations: Violation[] = [];
  const allowed = new Set<string>(CONTRACT_MODULES);
  const seen = new Set<string>();
  const queue = [CONTRACTS_INDEX];
  while (queue.length > 0) {
    const current = queue.shift() as string;
    if (seen.has(current)) continue;
    seen.add(current);
    const path = join(srcRoot, current);
    const source = readFileSync(path, "utf8");
    for (const imp of importsOf(srcRoot, path)) {
      if (!imp.specifier.startsWith(".")) {
        violations.push({
          rule: "contracts-import",
          file: current,
          line: lineOf(source, imp.specifier),
          detail: `package ${imp.specifier} is reachable from the contracts`,
        });
        continue;
      }
      if (!allowed.has(imp.target)) {
        violations.push({
          rule: "contracts-import",
          file: current,
          line: lineOf(source, imp.specifier),
          detail: `implementation module ${imp.target} is reachable from ${CONTRACTS_INDEX}`,
        });
        continue;
      }
      queue.push(imp.target);
    }
  }
  return violations;
}

/** (c) Only the composition root, and a backend package's own modules, import a backend. */
export function findBackendImports(srcRoot: string): Violation[] {
  const violations: Violation[] = [];
  for (const file of walk(srcRoot)) {
    if (!/\.(ts|tsx|js|mjs)$/.test(file)) continue;
    const name = rel(srcRoot, file);
    if (name.startsWith(COMPOSITION_ROOT)) continue;
    const source = readFileSync(file, "utf8");
    for (const imp of importsOf(srcRoot, file)) {
      const pkg = BACKEND_PACKAGES.find((p) => imp.target.startsWith(p));
      if (!pkg || name.startsWith(pkg)) continue;
      violations.push({
        rule: "backend-import",
        file: name,
        line: lineOf(source, imp.specifier),
        detail: `imports backend package ${pkg} (${imp.specifier}); only ${COMPOSITION_ROOT} may`,
      });
    }
  }
  return violations;
}

// Every way a module names another, type-only ones included (the transpiler's scan drops
// `import type`, `export type` and `import("x").T`, yet each is an arrow between rooms):
// `import ... from "x"`, `export ... from "x"`, `import "x"`, `import("x")` with a quoted or
// template literal, and `require("x")`.
const STATIC_FROM = /\b(?:import|export)\b[^;"'`]*?\bfrom\s*["'`]([^"'`]+)["'`]/g;
const BARE_IMPORT = /\bimport\s*["'`]([^"'`]+)["'`]/g;
const CALL_IMPORT = /\b(?:import|require)\s*\(\s*["'`]([^"'`$]+)["'`]\s*\)/g;
// A dynamic import whose specifier is computed cannot be checked, so the core may not have one.
const COMPUTED_IMPORT = /\b(?:import|require)\s*\(\s*(?!["'`][^"'`$]+["'`]\s*\))/g;

/** Every specifier a source text names, with its line; `computed` for an uncheckable one. */
export function specifiersOf(
  source: string,
): { readonly specifier: string; readonly line: number }[] {
  const lineAt = (index: number) => source.slice(0, index).split("\n").length;
  const out: { specifier: string; line: number }[] = [];
  for (const pattern of [STATIC_FROM, BARE_IMPORT, CALL_IMPORT]) {
    for (const m of source.matchAll(pattern)) {
      out.push({ specifier: m[1] as string, line: lineAt(m.index) });
    }
  }
  for (const m of source.matchAll(COMPUTED_IMPORT)) {
    out.push({ specifier: "computed", line: lineAt(m.index) });
  }
  return out;
}

/** (d) No module of the core imports an edge (store, api, daemon, cli). */
export function findCoreImports(
  srcRoot: string,
  known: readonly { readonly file: string; readonly target: string }[] = [],
): Violation[] {
  const violations: Violation[] = [];
  for (const file of walk(join(srcRoot, CORE))) {
    if (!/\.(ts|tsx|js|mjs|cjs)$/.test(file)) continue;
    const name = rel(srcRoot, file);
    const source = readFileSync(file, "utf8");
    for (const { specifier, line } of specifiersOf(source)) {
      if (specifier === "computed") {
        violations.push({
          rule: "core-import",
          file: name,
          line,
          detail: "a computed import() or require(): the core's imports must be checkable",
        });
        continue;
      }
      if (!specifier.startsWith(".") && !specifier.startsWith("/")) continue;
      const target = rel(srcRoot, resolve(dirname(file), specifier));
      const edge = EDGES.find((e) => target.startsWith(e) || `${target}/` === e);
      if (!edge) continue;
      if (known.some((k) => k.file === name && k.target === target)) continue;
      violations.push({
        rule: "core-import",
        file: name,
        line,
        detail: `imports ${target} (${specifier}); the core defines a port in ${CORE}ports/ instead`,
      });
    }
  }
  return violations;
}

export function checkLeaks(srcRoot: string): Violation[] {
  return [
    ...findSchedulerWords(srcRoot),
    ...findContractLeaks(srcRoot),
    ...findBackendImports(srcRoot),
    ...findCoreImports(srcRoot, KNOWN_CORE_IMPORTS),
  ];
}

export function formatViolations(violations: readonly Violation[]): string {
  return violations.map((v) => `src/${v.file}:${v.line}: [${v.rule}] ${v.detail}`).join("\n");
}
