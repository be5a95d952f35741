/**
 * `bun run bench`: runs every `bench/*.bench.ts` and prints one table of their figures.
 *
 * Each bench is its own program (its `import.meta.main` block) and runs in its own process,
 * one after another: benches start daemons, clusters and workers, and one that leaks a
 * handle or loads the machine must not skew or hang the next. A bench reports by printing,
 * as its last JSON line on stdout, `{"bench": NAME, ...}`; when that object has a `table`
 * (`[{metric, value, target?}]`) those rows are shown, otherwise its numeric leaves are. A
 * bench that prints no JSON and exits 0 (e.g. no cluster configured) is listed as skipped.
 *
 * Usage: `bun bench/run.ts [--quick] [NAME_FILTER ...]` (e.g. `bun run bench reconciler`).
 * `--quick` (CI) sets O4S_BENCH_QUICK=1, which every bench reads to shrink its sizes to a few
 * seconds: the figures are printed, never asserted, so a slow machine cannot fail CI, but a
 * bench that no longer runs (the API moved under it) does. Exit code 1 when any bench failed.
 */
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";

interface Row {
  readonly bench: string;
  readonly metric: string;
  readonly value: string;
  readonly target: string;
}

function cpuModel(): string {
  try {
    const line = readFileSync("/proc/cpuinfo", "utf8")
      .split("\n")
      .find((l) => l.startsWith("model name"));
    return line ? line.split(":").slice(1).join(":").trim() : "unknown";
  } catch {
    return "unknown";
  }
}

function lastJson(stdout: string): Record<string, unknown> | null {
  const lines = stdout.split("\n").reverse();
  for (const line of lines) {
    const t = line.trim();
    if (!t.startsWith("{")) continue;
    try {
      const value: unknown = JSON.parse(t);
      if (value !== null && typeof value === "object" && "bench" in value) {
        return value as Record<string, unknown>;
      }
    } catch {
      // not the report line
    }
  }
  return null;
}

function numericLeaves(value: unknown, path: string, out: [string, string][], depth = 0): void {
  if (typeof value === "number")
    out.push([path, Number.isInteger(value) ? String(value) : value.toFixed(2)]);
  else if (value !== null && typeof value === "object" && depth < 4) {
    for (const [k, v] of Object.entries(value))
      numericLeaves(v, path ? `${path}.${k}` : k, out, depth + 1);
  }
}

function rowsOf(name: string, report: Record<string, unknown>): Row[] {
  const table = report["table"];
  if (Array.isArray(table)) {
    return table.map((r: { metric?: unknown; value?: unknown; target?: unknown }) => ({
      bench: name,
      metric: String(r.metric ?? ""),
      value: String(r.value ?? ""),
      target: r.target === undefined ? "" : String(r.target),
    }));
  }
  const leaves: [string, string][] = [];
  const { bench: _bench, ...rest } = report;
  numericLeaves(rest, "", leaves);
  return leaves.map(([metric, value]) => ({ bench: name, metric, value, target: "" }));
}

async function runOne(file: string): Promise<{ rows: Row[]; failed: boolean }> {
  const name = file.replace(/\.bench\.ts$/, "");
  console.log(`\n=== ${name} (${file})`);
  const started = performance.now();
  const child = Bun.spawn([process.execPath, join(import.meta.dir, file)], {
    stdout: "pipe",
    stderr: "inherit",
    env: quick ? { ...process.env, O4S_BENCH_QUICK: "1" } : process.env,
  });
  let stdout = "";
  const decoder = new TextDecoder();
  for await (const chunk of child.stdout) {
    const text = decoder.decode(chunk, { stream: true });
    stdout += text;
    process.stdout.write(text);
  }
  const code = await child.exited;
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const report = lastJson(stdout);
  if (code !== 0) {
    return {
      rows: [{ bench: name, metric: "FAILED", value: `exit code ${code}`, target: `${seconds} s` }],
      failed: true,
    };
  }
  if (report === null) {
    const first = stdout.trim().split("\n")[0] ?? "";
    return {
      rows: [{ bench: name, metric: "skipped", value: first.slice(0, 80), target: "" }],
      failed: false,
    };
  }
  return { rows: rowsOf(name, report), failed: false };
}

const args = process.argv.slice(2);
const quick = args.includes("--quick");
const filters = args.filter((a) => a !== "--quick");
const files = readdirSync(import.meta.dir)
  .filter((f) => f.endsWith(".bench.ts"))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error(`no bench matches ${JSON.stringify(filters)}`);
  process.exit(2);
}

const rows: Row[] = [];
let failed = false;
for (const file of files) {
  const result = await runOne(file);
  rows.push(...result.rows);
  failed ||= result.failed;
}

console.log(`\n## Benchmarks (${availableParallelism()} cores, ${cpuModel()})\n`);
console.log("| bench | metric | value | target |");
console.log("|---|---|---:|---|");
for (const r of rows) console.log(`| ${r.bench} | ${r.metric} | ${r.value} | ${r.target} |`);
process.exit(failed ? 1 : 0);
