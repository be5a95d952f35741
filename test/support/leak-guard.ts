/**
 * INV-2 (Backend Opacity) and the tree's layering, checked rather than wished for.
 *
 * The tree says what may import what (docs/architecture.md draws it):
 *   core/      the rules, models and ports: imports only core/, wire/ (types) and lib/'s pure
 *              leaves; does no I/O (no fs, spawn, sockets, `process.env`)
 *   wire/      the worker protocol and credential format: imports only wire/ and lib/
 *   lib/       clock, log, durable fs, process runner, argument parsing: imports only lib/
 *   adapters/  one folder per adapter (backend-local, backend-slurm, isolation-bwrap, spool,
 *              store-sqlite, metrics): each imports core/, wire/, lib/ and itself, never another
 *              adapter, a server or an app
 *   servers/   http (the Hono app) and worker-gateway: core/, wire/, lib/, themselves
 *   apps/      daemon (with its composition root), cli, worker: may import anything
 *
 * Claims, each a function over a source tree so a test can run them on a doctored copy:
 *  (a) no file outside the exempt paths contains a scheduler word, comments included;
 *  (b) the import graph from the contracts' index reaches only contract modules;
 *  (c) no module outside the composition root imports a backend package;
 *  (d) every import respects the layers above (type-only, dynamic and re-exports included);
 *  (e) the core names no I/O module or global;
 *  (f) the process's environment is read in one place (ENV_READERS), and every command gets
 *      it from there: the daemon parses its settings from that once (apps/daemon/config.ts).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { BACKEND_LIST_FILE, LISTED_BACKENDS } from "./backend-list.ts";

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

/**
 * Paths (relative to src/) allowed to name the scheduler: the list of backends, and the
 * folder of each listed backend whose plugin drives a scheduler (backend-lists.ts).
 */
export const SCHEDULER_EXEMPT: readonly string[] = [
  ...LISTED_BACKENDS.filter((b) => b.schedulerBroker !== null).map((b) => b.folder),
  BACKEND_LIST_FILE,
];

/** Backend packages: only the composition root (and the package itself) may import them. */
export const BACKEND_PACKAGES: readonly string[] = LISTED_BACKENDS.map((b) => b.folder);

/** The composition root, a folder: every module in it may import a backend package. */
export const COMPOSITION_ROOT = "apps/daemon/composition/";
export const CONTRACTS_INDEX = "core/index.ts";

/** The modules that make up the contracts; everything else is implementation. */
export const CONTRACT_MODULES = [
  "core/index.ts",
  "core/models.ts",
  "core/ports/allocation-backend.ts",
  "core/ports/backend-capabilities.ts",
  "core/attempt-preparer.ts",
  "core/sandbox.ts",
] as const;

/** The core: what it imports must come from itself, wire/ or lib/'s pure leaves. */
export const CORE = "core/";
/** lib/ modules that do no I/O of their own, so the core may use them. */
export const PURE_LIB = ["lib/clock.ts", "lib/log.ts"] as const;

/** Modules and globals that do I/O: none may appear in the core. */
export const CORE_FORBIDDEN_MODULES = [
  "node:fs",
  "node:fs/promises",
  "fs",
  "node:child_process",
  "node:net",
  "node:tls",
  "node:os",
  "node:http",
  "node:https",
  "node:http2",
  "node:dgram",
  "node:worker_threads",
  "bun",
  "bun:sqlite",
  "bun:ffi",
] as const;
export const CORE_FORBIDDEN_GLOBALS = [
  "process.env",
  "Bun.spawn",
  "Bun.file",
  "Bun.write",
  "Bun.listen",
  "Bun.connect",
  "Bun.serve",
  "Bun.which",
] as const;

/** A layer: a folder of src/ and the folders it may import besides itself. */
interface Layer {
  readonly name: string;
  /** One unit per sub-folder (adapters/x/): units of a layer do not import each other. */
  readonly unitPerFolder: boolean;
  readonly mayImport: readonly string[];
}
export const LAYERS: readonly Layer[] = [
  { name: "core/", unitPerFolder: false, mayImport: ["wire/", ...PURE_LIB] },
  { name: "wire/", unitPerFolder: false, mayImport: ["lib/"] },
  { name: "lib/", unitPerFolder: false, mayImport: [] },
  { name: "adapters/", unitPerFolder: true, mayImport: ["core/", "wire/", "lib/"] },
  { name: "servers/", unitPerFolder: true, mayImport: ["core/", "wire/", "lib/"] },
];

/**
 * Crossings that are the design, not debt, each with its reason: a unit (or file) and what it
 * may import beyond its layer.
 */
export const UNIT_ALLOWANCES: readonly {
  readonly unit: string;
  readonly mayImport: readonly string[];
  readonly why: string;
}[] = [
  {
    unit: "servers/http/",
    mayImport: ["adapters/store-sqlite/", "adapters/metrics/"],
    why: "reads are answered straight from the store's rows (the read side has no port: a list of 10k workloads at 5k req/s) and /metrics renders the daemon's instruments",
  },
  {
    unit: "adapters/store-sqlite/wal-checkpointer.ts",
    mayImport: ["thread-entrypoints.ts"],
    why: "a worker thread's entrypoint URL must be resolved from src/, the bundle's common root",
  },
];

/**
 * Layer crossings that are debt, not design, each with the change that removes it. Empty:
 * the last two (the local backend building isolation-bwrap's plain wrapper) went when the
 * composition started handing it in (SessionIsolationKit.plainLaunch). docs/architecture.md
 * names each one listed here (test/docs/architecture-paths.test.ts checks it).
 */
export const KNOWN_LAYER_IMPORTS: readonly {
  readonly file: string;
  readonly target: string;
  readonly why: string;
}[] = [];

export interface Violation {
  readonly rule:
    | "scheduler-word"
    | "contracts-import"
    | "backend-import"
    | "layer-import"
    | "core-io"
    | "env-read";
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

function layerOf(name: string): Layer | undefined {
  return LAYERS.find((l) => name.startsWith(l.name));
}

/** The unit a module belongs to: `adapters/backend-local/` for a file in it, else its layer. */
function unitOf(name: string, layer: Layer): string {
  if (!layer.unitPerFolder) return layer.name;
  const rest = name.slice(layer.name.length);
  const slash = rest.indexOf("/");
  return slash < 0 ? name : `${layer.name}${rest.slice(0, slash + 1)}`;
}

function allowed(from: string, target: string, layer: Layer): boolean {
  // Outside src/ (package.json for the version): not a room of the tree.
  if (target.startsWith("../")) return true;
  if (target.startsWith(unitOf(from, layer))) return true;
  const extra = UNIT_ALLOWANCES.filter((a) => from.startsWith(a.unit)).flatMap((a) => a.mayImport);
  if (extra.some((m) => (m.endsWith("/") ? target.startsWith(m) : target === m))) return true;
  return layer.mayImport.some((m) => (m.endsWith("/") ? target.startsWith(m) : target === m));
}

/** (d) Every relative import of a layered module stays within what its layer may import. */
export function findLayerImports(
  srcRoot: string,
  known: readonly { readonly file: string; readonly target: string }[] = [],
): Violation[] {
  const violations: Violation[] = [];
  for (const file of walk(srcRoot)) {
    if (!/\.(ts|tsx|js|mjs|cjs)$/.test(file)) continue;
    const name = rel(srcRoot, file);
    const layer = layerOf(name);
    if (!layer) continue;
    const source = readFileSync(file, "utf8");
    for (const { specifier, line } of specifiersOf(source)) {
      if (specifier === "computed") {
        violations.push({
          rule: "layer-import",
          file: name,
          line,
          detail: "a computed import() or require(): a layer's imports must be checkable",
        });
        continue;
      }
      if (!specifier.startsWith(".") && !specifier.startsWith("/")) continue;
      const target = rel(srcRoot, resolve(dirname(file), specifier));
      if (allowed(name, target, layer)) continue;
      if (known.some((k) => k.file === name && k.target === target)) continue;
      violations.push({
        rule: "layer-import",
        file: name,
        line,
        detail: `imports ${target} (${specifier}); ${unitOf(name, layer)} may import only itself and ${layer.mayImport.join(", ") || "nothing else"}`,
      });
    }
  }
  return violations;
}

/** (e) The core names no module or global that does I/O. */
export function findCoreIo(srcRoot: string): Violation[] {
  const violations: Violation[] = [];
  for (const file of walk(join(srcRoot, CORE))) {
    if (!/\.(ts|tsx|js|mjs|cjs)$/.test(file)) continue;
    const name = rel(srcRoot, file);
    const source = readFileSync(file, "utf8");
    for (const { specifier, line } of specifiersOf(source)) {
      if ((CORE_FORBIDDEN_MODULES as readonly string[]).includes(specifier)) {
        violations.push({ rule: "core-io", file: name, line, detail: `imports ${specifier}` });
      }
    }
    source.split("\n").forEach((text, i) => {
      for (const global of CORE_FORBIDDEN_GLOBALS) {
        if (text.includes(global)) {
          violations.push({ rule: "core-io", file: name, line: i + 1, detail: `uses ${global}` });
        }
      }
    });
  }
  return violations;
}

/**
 * The files that may read the process's environment, each with its reason. Everything else
 * gets the environment it needs passed in: a module reading a variable on its own is how a
 * setting escapes the one parse that names every bad value at start (issue 20).
 */
export const ENV_READERS: readonly { readonly file: string; readonly why: string }[] = [
  {
    file: "lib/command/command.ts",
    why: "the process's one CommandIo: every command (serve, the CLI, the worker) receives its environment from here",
  },
];

/** Reads of the environment in code (comments do not count): `process.env`, `Bun.env`, ... */
const ENV_READ_PATTERNS: readonly RegExp[] = [
  /\bprocess\s*\.\s*env\b/,
  /\bprocess\s*\[\s*["'`]env["'`]\s*\]/,
  /\bBun\s*\.\s*env\b/,
  /\bimport\.meta\.env\b/,
  /\{[^}]*\benv\b[^}]*\}\s*=\s*process\b/,
];

/** (f) No file outside ENV_READERS reads the process's environment. */
export function findEnvReads(srcRoot: string): Violation[] {
  const allowed = new Set(ENV_READERS.map((r) => r.file));
  const violations: Violation[] = [];
  for (const file of walk(srcRoot)) {
    if (!/\.(ts|tsx|js|mjs|cjs)$/.test(file)) continue;
    const name = rel(srcRoot, file);
    if (allowed.has(name)) continue;
    readFileSync(file, "utf8")
      .split("\n")
      .forEach((text, i) => {
        const trimmed = text.trim();
        if (trimmed.startsWith("*") || trimmed.startsWith("/*")) return;
        const code = text.replace(/\/\/.*$/, "");
        if (ENV_READ_PATTERNS.some((pattern) => pattern.test(code))) {
          violations.push({
            rule: "env-read",
            file: name,
            line: i + 1,
            detail: `reads the process's environment (${trimmed}); take it from the caller (ENV_READERS)`,
          });
        }
      });
  }
  return violations;
}

export function checkLeaks(srcRoot: string): Violation[] {
  return [
    ...findSchedulerWords(srcRoot),
    ...findContractLeaks(srcRoot),
    ...findBackendImports(srcRoot),
    ...findLayerImports(srcRoot, KNOWN_LAYER_IMPORTS),
    ...findCoreIo(srcRoot),
    ...findEnvReads(srcRoot),
  ];
}

export function formatViolations(violations: readonly Violation[]): string {
  return violations.map((v) => `src/${v.file}:${v.line}: [${v.rule}] ${v.detail}`).join("\n");
}
